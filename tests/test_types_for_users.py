"""What a type checker tells a user of tinystore: ``mypy --strict`` over small programs written as a user writes
them, against tinystore as it is installed (its ``py.typed`` and annotations).

A misspelt queue option and an option of the wrong type are refused before the program runs; a job's state is a
``Literal`` of its six names, so a comparison with a name that is no state is refused too; code that uses
tinystore correctly passes. All the programs are checked in one run of mypy (it takes seconds).
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import typing
from pathlib import Path

import pytest

import tinystore

PROGRAMS = {
    "correct": """
        from datetime import timedelta

        import tinystore

        options: tinystore.QueueOptionArgs = {"attempts": 5, "backoff": ("1s", timedelta(minutes=5))}
        with tinystore.open("app.db") as store:
            mail = store.queue("mail", concurrency=3, rate="600/m", group_rate=(5, "1s"), timeout=None,
                               lease=30, keep=timedelta(days=1))
            store.queue("retries", **options)
            store.schedule("nightly", cron="0 3 * * *", zone="UTC", dedupe="1h")
            job = mail.add({"to": "ada@example.com"})
            name: tinystore.JobStateName = job.state
            if job.state == "failed":
                print(name, job.error)
            mail.jobs(state="waiting")
            reveal_type(job.state)
        """,
    "misspelt_option": """
        import tinystore

        store = tinystore.open("app.db")
        store.queue("q", concurency=3)
        """,
    "string_for_attempts": """
        import tinystore

        store = tinystore.open("app.db")
        store.queue("q", attempts="three")
        """,
    "misspelt_schedule_option": """
        import tinystore

        store = tinystore.open("app.db")
        store.schedule("nightly", every="1d", atempts=3)
        """,
    "state_that_is_no_state": """
        import tinystore

        job = tinystore.open("app.db").queue("q").add({})
        if job.state == "finished":
            print(job)
        """,
}

STATE_NAMES = ("scheduled", "waiting", "running", "done", "failed", "cancelled")


@pytest.fixture(scope="module")
def mypy_said(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """mypy --strict's lines about each program, by the program's name: one run over all of them, from a
    folder outside the source tree, with the Python that runs the tests (where tinystore is installed)."""
    folder = tmp_path_factory.mktemp("programs")
    for name, code in PROGRAMS.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(code).lstrip("\n"))
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--python-executable", sys.executable, "--no-error-summary",
         "--cache-dir", str(folder / ".mypy_cache"), *(f"{name}.py" for name in PROGRAMS)],
        cwd=folder, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr or done.stdout  # 2: mypy itself failed
    said: dict[str, list[str]] = {name: [] for name in PROGRAMS}
    for line in done.stdout.splitlines():
        file = Path(line.split(":", 1)[0]).stem
        assert file in said, f"mypy spoke of a file that is no program of the test: {line}"
        said[file].append(line)
    return said


def errors(lines: list[str]) -> list[str]:
    return [line for line in lines if ": error:" in line]


def test_correct_code_passes_mypy_strict(mypy_said: dict[str, list[str]]) -> None:
    assert errors(mypy_said["correct"]) == [], mypy_said["correct"]


def test_a_jobs_state_is_a_literal_of_the_six_state_names(mypy_said: dict[str, list[str]]) -> None:
    [revealed] = [line for line in mypy_said["correct"] if "Revealed type" in line]
    # mypy writes it Literal['scheduled', ...] or Literal['scheduled'] | ..., as its version does
    type_ = revealed.split("Revealed type is ", 1)[1]
    assert re.fullmatch(r'"(Literal\[[^]]*\]( \| )?)+"', type_), revealed
    assert tuple(re.findall(r"'(\w+)'", type_)) == STATE_NAMES, revealed
    assert typing.get_args(tinystore.JobStateName) == STATE_NAMES


def test_a_misspelt_queue_option_is_refused(mypy_said: dict[str, list[str]]) -> None:
    [error] = errors(mypy_said["misspelt_option"])
    assert re.search(r':4: error: Unexpected keyword argument "concurency" .*"concurrency"', error), error


def test_a_string_for_attempts_is_refused(mypy_said: dict[str, list[str]]) -> None:
    [error] = errors(mypy_said["string_for_attempts"])
    assert re.search(r':4: error: Argument "attempts" .* has incompatible type "str"; expected "int"', error), error


def test_a_misspelt_schedule_option_is_refused(mypy_said: dict[str, list[str]]) -> None:
    [error] = errors(mypy_said["misspelt_schedule_option"])
    assert re.search(r':4: error: Unexpected keyword argument "atempts"', error), error


def test_comparing_a_state_with_a_name_that_is_no_state_is_refused(mypy_said: dict[str, list[str]]) -> None:
    [error] = errors(mypy_said["state_that_is_no_state"])
    assert re.search(r":4: error: Non-overlapping equality check .*'finished'", error), error


def test_at_run_time_a_misspelt_option_is_invalid_argument_naming_the_queue(tmp_path: Path) -> None:
    with tinystore.open(tmp_path / "app.db") as store:
        with pytest.raises(tinystore.InvalidArgument, match=r"unknown queue option 'concurency'") as caught:
            store.queue("mail", **{"concurency": 3})  # a dict of options, as settings give them
        assert caught.value.queue == "mail"
        assert "mail" not in store.queues()  # nothing was kept
