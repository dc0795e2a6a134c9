"""Shared pytest hooks: each test's outcome is kept on its item, so fixtures can tell in their
teardown whether the test failed (and keep what explains the failure)."""
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def pytest_configure(config):
    # The tiers (scripts/run-tests): `make test` runs the tests not marked slow, `make check`
    # all of them. A test's tier is declared on the test.
    config.addinivalue_line(
        "markers", "slow: only in `make check` (minutes of machine time, or a Slurm cluster, "
        "torch, a policy or incident library)")
    # pytest-xdist runs the rest on several workers; these run alone, after them.
    config.addinivalue_line(
        "markers", "serial: cannot share the machine with another test (the marker's comment "
        "at the test says why)")
