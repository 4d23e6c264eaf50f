"""The one object that resolves every option of a session (profile, platform, level, report folder).

Everything else receives values from it; nothing else reads the config.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from .catalogue import LEVELS
from .platform import Platform, PlatformError, from_spec
from .profiles import Profile, ProfileError, auto_pick, resolve

ENV_PROFILE, ENV_PLATFORM, ENV_LEVEL, ENV_REPORT_DIR = (
    "SITS_PROFILE", "SITS_PLATFORM", "SITS_LEVEL", "SITS_REPORT_DIR")


class SitsUsageError(Exception):
    """A bad option, profile or platform: the message names the fix."""


def _pick(option: Optional[str], env_name: str, ini: Optional[str]) -> Tuple[Optional[str], str]:
    if option:
        return option, "option"
    if os.environ.get(env_name):
        return os.environ[env_name], "env"
    if ini:
        return ini, "ini"
    return None, "default"


@dataclass
class SitsRun:
    profile: Profile
    platform: Platform
    level: str
    level_how: str
    report_dir: Optional[Path]
    started_at: float = field(default_factory=time.time)
    golden_record: Optional[Path] = None
    golden: Optional[Path] = None

    @classmethod
    def resolve(cls, *, profile_opt: Optional[str], profile_ini: Optional[str], platform_opt: Optional[str],
                platform_ini: Optional[str], level_opt: Optional[str], level_ini: Optional[str],
                report_dir_opt: Optional[str], report_dir_ini: Optional[str]) -> "SitsRun":
        level, level_how = _pick(level_opt, ENV_LEVEL, level_ini)
        level = level or "quick"
        if level not in LEVELS:
            raise SitsUsageError(f"unknown level {level!r} (from {level_how}); fix: use one of {', '.join(LEVELS)}")
        plat_spec, plat_how = _pick(platform_opt, ENV_PLATFORM, platform_ini)
        prof_spec, prof_how = _pick(profile_opt, ENV_PROFILE, profile_ini)
        try:
            platform = from_spec(plat_spec or "live")
            platform.inventory()  # a broken snapshot is a usage error now, not a traceback later
            if prof_spec:
                flag = {"option": "--sits-profile", "env": f"${ENV_PROFILE}", "ini": "ini sits_profile"}[prof_how]
                profile = resolve(prof_spec, how=prof_how, why=f"{flag}={prof_spec}")
            elif getattr(platform, "profile", None) is not None:
                profile = platform.profile
                profile.how, profile.why = "platform", "the profile the simulated platform was built from"
            else:
                name, why = auto_pick(platform.inventory()["accelerators"])
                profile = resolve(name, how="auto", why=why)
        except ProfileError as exc:
            raise SitsUsageError(f"bad profile: {exc}") from None
        except PlatformError as exc:
            raise SitsUsageError(f"bad platform: {exc}") from None
        rd, _ = _pick(report_dir_opt, ENV_REPORT_DIR, report_dir_ini)
        rd = rd or "sits-report"
        report_dir = None if rd.lower() == "none" else (Path(rd) if Path(rd).is_absolute() else Path.cwd() / rd)
        return cls(profile=profile, platform=platform, level=level, level_how=level_how, report_dir=report_dir)

    def expected(self) -> Dict[str, Any]:
        """What the profile says should be installed, for the checks."""
        ident, hw = self.profile.identity, self.profile.hardware
        return {"vendor": ident.get("vendor"), "model": ident.get("model"), "kind": ident.get("kind"),
                "pci_ids": list(ident.get("pci_ids", [])), "count": self.profile.expected_count,
                "memory_gb": hw.get("memory_gb"), "describe": self.profile.describe_expected(),
                "profile": self.profile.name}
