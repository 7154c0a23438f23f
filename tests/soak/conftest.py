"""The soak's marker: ``pytest -m "not soak"`` leaves out the minute-long soaks."""


def pytest_configure(config):
    config.addinivalue_line("markers", "soak: a soak test, one minute of processes and faults (tests/soak/run.py)")
