"""Hostile files and names found by a fuzz campaign: one ``error:`` line and exit status 2, never a traceback."""

from __future__ import annotations

import os


def _one_line(rc, out, err, *fragments):
    assert rc == 2 and out == "", (rc, out)
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    for f in fragments:
        assert f in err, err


def test_links_file_nested_500_deep(cli, tmp_path):
    f = tmp_path / "deep.toml"
    f.write_text("x = " + "[" * 500 + "]" * 500 + "\n")
    _one_line(*cli(["run", "--strategy", "allreduce", "--nodes", "2", "--links", str(f)]), "nested too deeply")


def test_links_name_of_300_characters(cli):
    _one_line(*cli(["run", "--strategy", "allreduce", "--nodes", "2", "--links", "y" * 300]), "y" * 300)


def test_calibrate_check_record_nested_100000_deep(cli, tmp_path):
    f = tmp_path / "deep.json"
    f.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    _one_line(*cli(["calibrate", "--check", str(f)]), "nested too deeply")


def test_calibrate_check_on_a_fifo_is_refused_without_blocking(cli, tmp_path):
    fifo = tmp_path / "f.json"
    os.mkfifo(fifo)
    _one_line(*cli(["calibrate", "--check", str(fifo)]), "not a regular file", "FIFO")

