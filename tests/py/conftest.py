"""Shared pytest hooks: each test's outcome is kept on its item, so fixtures can tell in their
teardown whether the test failed (and keep what explains the failure)."""
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)
