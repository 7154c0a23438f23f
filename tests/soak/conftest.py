"""The soak's marker: ``pytest -m "not soak"`` leaves out the minute-long soak."""


def pytest_configure(config):
    config.addinivalue_line("markers", "soak: the soak test, one minute of processes and faults (tests/soak/run.py)")
