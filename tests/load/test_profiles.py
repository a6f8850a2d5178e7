"""Load profiles: the closed-loop default, the registry, and 'a new profile is one class in profiles.py'."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest

import sglab.load.profiles as profiles
from sglab.config.loadplan import LoadPlan
from sglab.load.profiles import PROFILES, profile_for, profile_names


def test_concurrency_is_the_default_profile_and_is_closed_loop():
    plan = LoadPlan(concurrency=[1, 4, 16])
    profile = profile_for(plan)
    assert profile.name == "concurrency"
    assert profile.levels() == [1, 4, 16]
    assert [profile.users_for(c) for c in profile.levels()] == [1, 4, 16]
    pacing = profile.pacing(4, 0)
    assert [pacing.start_offset_s(i) for i in range(3)] == [None, None, None]
    assert profile.level_for_users(8) == 8


def test_unknown_profile_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown load profile 'nope'.*concurrency"):
        profile_for(LoadPlan(), "nope")


def test_a_new_profile_is_one_class_in_profiles_py(tmp_path):
    """profiles.py with one more `@register`ed class appended, and nothing else: the class is found by name."""
    addition = textwrap.dedent('''

        class Tick(Pacing):
            def start_offset_s(self, index):
                return 0.5 * index


        @register
        class EveryOther(LoadProfile):
            name = "test-every-other"
            level_label = "users"

            def levels(self):
                return [2 * c for c in self.plan.concurrency]

            def users_for(self, level):
                return level // 2

            def pacing(self, level, round_index):
                return Tick()
    ''')
    copy = tmp_path / "profiles_plus_one.py"
    copy.write_text(Path(profiles.__file__).read_text(encoding="utf-8") + addition, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("profiles_plus_one", copy)
    extended = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(extended)
    assert extended.profile_names() == sorted([*profile_names(), "test-every-other"])
    profile = extended.profile_for(LoadPlan(concurrency=[1, 3]), "test-every-other")
    assert profile.levels() == [2, 6] and profile.users_for(6) == 3
    assert profile.pacing(2, 0).start_offset_s(3) == 1.5
    assert "test-every-other" not in PROFILES  # the shipped registry is untouched
