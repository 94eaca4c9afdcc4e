"""`relay schedules` and scheduled job files as an operator submits them."""

from __future__ import annotations

import json

from helpers import Workspace, job_toml, sim


def scheduled(job_id: str, cron: str, **job: str) -> str:
    return job_toml(job_id, [{"id": "t", "input": "x", "sim": sim()}], schedule=cron, **job)


def test_relay_schedules_lists_each_template_with_its_next_run(
    sqlite_workspace: Workspace,
) -> None:
    ws = sqlite_workspace
    empty = ws.cli("schedules")
    assert empty.returncode == 0 and "no scheduled jobs" in empty.stdout
    assert "a job file's [job] takes schedule" in empty.stdout  # not read as markup
    path = ws.write_job(scheduled("nightly", "0 2 * * *", timezone="Europe/Berlin"), "n.toml")
    submitted = ws.cli("submit", str(path))
    assert submitted.returncode == 0, submitted.stderr
    assert "scheduled job nightly submitted" in submitted.stdout
    again = ws.cli("submit", str(path))
    assert again.returncode == 0 and "unchanged" in again.stdout
    listed = ws.cli("schedules")
    assert listed.returncode == 0, listed.stderr
    assert "nightly" in listed.stdout and "0 2 * * *" in listed.stdout
    assert "T0200" in listed.stdout and "never" in listed.stdout
    (row,) = json.loads(ws.cli("schedules", "--json").stdout)
    assert row["next_run"].startswith("nightly@") and row["next_run"].endswith("T0200")
    assert (row["timezone"], row["catch_up"], row["last_run"], row["missed"]) == (
        "Europe/Berlin",
        "last",
        None,
        0,
    )
    assert ws.status()["jobs"] == []  # a template is not a job; its runs are
    asked = ws.cli("status", "nightly")
    assert asked.returncode == 2 and "nightly is a scheduled job" in asked.stderr


def test_a_bad_cron_expression_is_one_line_naming_file_field_and_problem(
    sqlite_workspace: Workspace,
) -> None:
    ws = sqlite_workspace
    path = ws.write_job(scheduled("nightly", "0 9 * * mon-fry"), "bad.toml")
    result = ws.cli("submit", str(path))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(path) in lines[0] and "job.schedule:" in lines[0]
    assert "'0 9 * * mon-fry' is not a cron expression croniter accepts" in lines[0]
    assert "Traceback" not in result.stderr
    assert "no scheduled jobs" in ws.cli("schedules").stdout
