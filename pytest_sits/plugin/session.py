"""The one object that resolves every option of a session: profile, platform, level, report folder, golden set.

:meth:`SitsRun.from_config` is the only code that reads the sits options;
everything else receives values from the run.  Under pytest-xdist the
controller resolves the run once and hands it to every worker
(:meth:`to_workerinput` / :meth:`from_workerinput`): the workers use the same
profile file and the controller's inventory instead of probing again.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..catalogue import LEVELS
from ..checks.inventory import declared_model, named_only
from ..platforms import Platform, PlatformError, from_spec
from ..profiles import Profile, ProfileError, auto_pick, bundled_identities, resolve
from .interrupts import Interrupts

ENV_PROFILE, ENV_PLATFORM, ENV_LEVEL, ENV_REPORT_DIR = (
    "SITS_PROFILE", "SITS_PLATFORM", "SITS_LEVEL", "SITS_REPORT_DIR")
#: The options an environment variable can set (option dest -> variable); the same dests are ini keys.
OPTION_ENV = {"sits_profile": ENV_PROFILE, "sits_platform": ENV_PLATFORM, "sits_level": ENV_LEVEL,
              "sits_report_dir": ENV_REPORT_DIR}


ENV_ENDPOINT_KEY = "OPENAI_API_KEY"
#: Options whose value is a secret: shown as *** wherever the command line is recorded.
SECRET_OPTIONS = ("--sits-endpoint-key",)
#: Options whose value is KEY=VALUE, the value possibly a secret.
ENV_OPTIONS = ("--sits-serve-env",)


def redact_args(args: Any) -> list:
    """The command line with the values of secret options replaced by ``***``."""
    out, hide = [], False
    for a in map(str, args):
        if hide:
            out.append("***")
            hide = False
            continue
        name = a.split("=", 1)[0]
        if name in ENV_OPTIONS:  # KEY=VALUE: the key is kept, the value may be a token
            if a.count("=") >= 2:
                out.append("=".join(a.split("=", 2)[:2]) + "=***")
            else:
                out.append(a)
                hide = a == name
            continue
        if name in SECRET_OPTIONS:
            if "=" in a:
                out.append(f"{name}=***")
            else:
                out.append(a)
                hide = True
            continue
        out.append(a)
    return out


def _unprofiled(accelerators: List[Dict[str, Any]]) -> List[str]:
    """The accelerator models no bundled profile is for, as "8 × NAME (PCI ID)": those with a known PCI ID, and
    those a text names without one (an Ascend NPU of `npu-smi info`: "1 × Ascend 910ProB (Huawei, no PCI ID in
    the texts)"), which no bundled profile can be picked for."""
    counts: Dict[Tuple[str, str], int] = {}
    for a in accelerators:
        if a.get("pci_id"):
            key = (str(a["pci_id"]), str(a.get("name") or f"{a.get('vendor') or 'an'} accelerator"))
            counts[key] = counts.get(key, 0) + 1
        elif named_only(a):
            key = (f"{a['vendor']}, no PCI ID in the texts", str(a["name"]))
            counts[key] = counts.get(key, 0) + 1
    return [f"{n} × {name} ({pci_id})" for (pci_id, name), n in sorted(counts.items())]


def _declared_pick(inventory: Dict[str, Any]) -> Optional[Tuple[List[str], str]]:
    """Submitted texts with no accelerator reading but an MLPerf systems JSON: the bundled profiles of the model it
    declares (by name and form factor: :func:`pytest_sits.checks.inventory.declared_model`; ``host`` where it
    declares no accelerator) and what it declares; None where there is no such declaration."""
    from ..conditions.inventory import declared_system

    decl = declared_system(inventory)
    if decl is None or inventory["accelerators"]:
        return None
    if decl.get("several"):
        return [], f"different systems in {', '.join(decl['several'][:4])}"
    model = str(decl.get("accelerator_model_name") or "")
    n = decl.get("accelerators_per_node")
    said = f"{n if n is not None else '?'} × {model} (declared in {decl['file']})"
    if n == 0:
        return ["host"], f"no accelerator (accelerators_per_node 0 in {decl['file']})"
    names = [name for name, (ident, aliases) in sorted(bundled_identities().items())
             if ident.get("model") and declared_model(model, ident, aliases)[0] is True]
    return names, said


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
    platform_spec: str = "live"
    #: An OpenAI-compatible completions endpoint held to SVC-SLA (None: the built-in model).
    endpoint: Optional[str] = None
    #: The BMC's Redfish service for wall power: url, and credentials from $SITS_REDFISH_USER/_PASSWORD.
    redfish: Optional[Dict[str, Any]] = None
    #: The signals this process received, and how they are handled (see interrupts.py).
    interrupts: Interrupts = field(default_factory=Interrupts)
    #: The run's scratch folder (the simulated machine's trees, the workers' too), made by the controller and
    #: removed by it at the end, also when a worker was killed before it could clean up.
    workdir: Optional[Path] = None
    owns_workdir: bool = False
    #: The server the suite launches (--sits-serve*), or None; ``served``: what it was once ready (the report's
    #: ``run.serving``); ``serve_error``: why it could not be started (its requirements are ERROR).
    serve: Optional[Any] = None
    served: Optional[Dict[str, Any]] = None
    serve_error: Optional[str] = None
    #: The prompts sent to the server under test (--sits-dataset), checked when the run starts; None: synthetic.
    dataset: Optional[Path] = None
    #: The endpoint's API key (--sits-endpoint-key, else $OPENAI_API_KEY); never written to a report.
    endpoint_key: Optional[str] = field(default=None, repr=False)
    #: Where the run's Prometheus textfile goes (None: none written).
    prometheus: Optional[Path] = None
    #: Seconds a test may run before the watchdog ends the run (None: no watchdog).
    watchdog_s: Optional[float] = None
    #: The load of the health window: "suite" (the accelerator burner) or "inference" (the PLP-* load).
    health_load: str = "suite"
    #: The run's time budget in minutes (--sits-budget), or None: the default plan.
    budget_min: Optional[float] = None
    #: pytest-xdist workers (1 without xdist): per-accelerator work runs on that many at once.
    workers: int = 1
    _plan: Any = field(default=None, repr=False)
    _environment: Any = field(default=None, repr=False)
    _environment_made: bool = field(default=False, repr=False)

    @classmethod
    def from_config(cls, config: Any) -> SitsRun:
        """Resolve every sits option of a pytest config (the controller's, or a worker's hand-over)."""
        workerinput = getattr(config, "workerinput", None)
        if workerinput and "sits" in workerinput:
            return cls.from_workerinput(workerinput["sits"])
        run = cls.resolve(
            profile_opt=config.getoption("sits_profile"), profile_ini=config.getini("sits_profile"),
            platform_opt=config.getoption("sits_platform"), platform_ini=config.getini("sits_platform"),
            level_opt=config.getoption("sits_level"), level_ini=config.getini("sits_level"),
            report_dir_opt=config.getoption("sits_report_dir"), report_dir_ini=config.getini("sits_report_dir"))
        run.set_golden(config.getoption("sits_golden_record"), config.getoption("sits_golden"))
        run.set_serve(config.getoption("sits_serve", None), config.getoption("sits_serve_port", None),
                      config.getoption("sits_serve_env", None), config.getoption("sits_serve_model", None),
                      config.getoption("sits_serve_timeout", None), config.getoption("sits_serve_accelerators", None),
                      endpoint=config.getoption("sits_endpoint", None))
        run.set_inference(config.getoption("sits_endpoint", None) or (run.serve.url if run.serve else None),
                          config.getoption("sits_redfish", None), config.getoption("sits_endpoint_key", None))
        run.set_dataset(config.getoption("sits_dataset", None))
        run.set_operations(config.getoption("sits_prometheus", None), config.getoption("sits_watchdog", None),
                           config.getoption("sits_health_load", None))
        run.set_budget(config.getoption("sits_budget", None))
        n = getattr(config.option, "numprocesses", None)
        run.workers = (os.cpu_count() or 1) if n in ("auto", "logical") else int(n or 1) if str(n or 1).isdigit() else 1
        return run

    def set_dataset(self, dataset: Optional[str]) -> None:
        """The dataset file, read and checked now (a bad one is a usage error naming its line); refused without a
        server under test: the built-in model draws token ids and would not use it."""
        if not dataset:
            return
        if not self.endpoint:
            raise SitsUsageError(f"--sits-dataset={dataset}: the prompts go to a server under test and none is "
                                 "given, so the file would not be used; fix: add --sits-serve=COMMAND or "
                                 "--sits-endpoint=URL, or drop --sits-dataset")
        from ..inference.workloads import DatasetError, load_dataset

        path = Path(dataset).resolve()
        try:
            load_dataset(path, {}, {})
        except DatasetError as exc:
            raise SitsUsageError(str(exc)) from None
        self.dataset = path

    def set_operations(self, prometheus: Optional[str], watchdog_s: Optional[float],
                       health_load: Optional[str]) -> None:
        """The Prometheus textfile, the watchdog and the health window's load, checked now."""
        if prometheus:
            from ..report.prometheus import PrometheusUnavailable, require_client

            try:
                require_client()
            except PrometheusUnavailable as exc:
                raise SitsUsageError(f"--sits-prometheus={prometheus}: {exc}") from None
            path = Path(prometheus)
            self.prometheus = path if path.is_absolute() else Path.cwd() / path
        if watchdog_s is not None:
            if not (0 < watchdog_s <= 7 * 86400):
                raise SitsUsageError(f"--sits-watchdog={watchdog_s:g}: must be between 0 and 604800 seconds; fix: "
                                     "give the longest a test may take, e.g. --sits-watchdog=300")
            self.watchdog_s = float(watchdog_s)
        self.health_load = health_load or "suite"

    def set_budget(self, budget: Any) -> None:
        """The run's time budget (--sits-budget MINUTES): a positive number of minutes, or a usage error."""
        if budget is None or budget == "":
            self.budget_min = None
            return
        try:
            minutes = float(budget)
        except (TypeError, ValueError):
            minutes = float("nan")
        if not (minutes > 0 and minutes <= 10_000):
            raise SitsUsageError(f"--sits-budget={budget!r} is not a number of minutes in (0, 10000]; fix: "
                                 "--sits-budget=15 (minutes the run may take)")
        self.budget_min = minutes
        self._plan = None

    def plan(self) -> Any:
        """The run's plan: the trials of each measured requirement and the time estimate (conditions/plan.py)."""
        if self._plan is None:
            from ..conditions.plan import Plan

            inv = self.platform.inventory()
            accs = len(self.expected_accelerators()) if self.profile.expected_count else 0
            packages = int((inv.get("cpu") or {}).get("sockets") or 1)
            self._plan = Plan(self.level, self.profile, accs, packages, self.budget_min, self.started_at,
                              workers=self.workers)
        return self._plan

    def set_serve(self, command: Optional[str], port: Any, env: Optional[List[str]], model: Optional[str],
                  timeout_s: Any, accelerators: Optional[str], endpoint: Optional[str] = None) -> None:
        """The server to launch (``--sits-serve*``), checked now: a bad value, or a serve option without
        ``--sits-serve``, is a usage error; the launch itself waits for the session (``plugin/serving.py``)."""
        extra = [flag for flag, v in (("--sits-serve-port", port), ("--sits-serve-env", env),
                                      ("--sits-serve-model", model), ("--sits-serve-timeout", timeout_s),
                                      ("--sits-serve-accelerators", accelerators)) if v not in (None, "", [])]
        section = self.profile.serving if self.profile is not None else {}
        if command == "profile":  # the profile's serving section, asked for on the command line
            if not section.get("command"):
                raise SitsUsageError(f"--sits-serve=profile: the profile {self.profile.name} ({self.profile.path}) "
                                     "has no serving.command; fix: add a serving: section with the command, or "
                                     "give the command itself, --sits-serve=COMMAND")
            command = section["command"]
            port = port if port not in (None, "") else section.get("port")
            env = [f"{k}={v}" for k, v in (section.get("env") or {}).items()] + list(env or [])
            model = model or section.get("model")
            timeout_s = timeout_s if timeout_s not in (None, "") else section.get("ready_timeout_s")
            accelerators = accelerators or ",".join(section.get("accelerators") or []) or None
        if not command:
            if extra:
                raise SitsUsageError(f"{', '.join(extra)} given without --sits-serve: there is no server to launch, "
                                     "so the option would be ignored; fix: add --sits-serve=COMMAND, or drop it")
            return
        if endpoint:
            raise SitsUsageError(f"--sits-serve and --sits-endpoint={endpoint} are exclusive: one server is under "
                                 "test; fix: --sits-serve to have the suite start it, --sits-endpoint for a server "
                                 "someone else runs")
        from ..inference.launch import ServeSpec

        try:
            self.serve = ServeSpec.parse(command, port, env, model, timeout_s, accelerators)
        except ValueError as exc:
            raise SitsUsageError(str(exc)) from None

    def set_inference(self, endpoint: Optional[str], redfish_url: Optional[str],
                      endpoint_key: Optional[str] = None) -> None:
        """The external system under test and the BMC, checked now (a bad URL is a usage error); the endpoint's
        key from the option, else ``$OPENAI_API_KEY``."""
        from urllib.parse import urlsplit

        for flag, url in (("--sits-endpoint", endpoint), ("--sits-redfish", redfish_url)):
            if url and (urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname):
                raise SitsUsageError(f"{flag} {url!r} is not an http(s) URL; fix: {flag} http://HOST:PORT")
        if endpoint:
            self._endpoint_used(endpoint)
        self.endpoint = endpoint or None
        self.endpoint_key = endpoint_key or os.environ.get(ENV_ENDPOINT_KEY) or None
        self.redfish = {"url": redfish_url, "user": os.environ.get("SITS_REDFISH_USER"),
                        "password": os.environ.get("SITS_REDFISH_PASSWORD")} if redfish_url else None

    def _endpoint_used(self, endpoint: str) -> None:
        """An endpoint the run would send no request to is refused, never ignored: a platform that is not the live
        host does not talk to servers, and below the level of the requirements that measure it nothing does."""
        from ..catalogue import CATALOGUE

        flag = f"--sits-serve={' '.join(self.serve.command)}" if self.serve else f"--sits-endpoint={endpoint}"
        if getattr(self.platform, "kind", "live") != "live":
            what = ("a simulated platform: its SVC-SLA is the simulation's" if self.platform.simulated else
                    f"a {self.platform.kind} platform: it judges what was recorded")
            raise SitsUsageError(f"{flag}: the platform {self.platform_spec} is {what} and never sends a request "
                                 "to a server, so your endpoint would not be measured; fix: run on the live host "
                                 "(drop --sits-platform) to measure the server, or drop "
                                 f"{flag.split('=')[0]}")
        from ..catalogue.inference import SERVED_REQUIREMENTS

        first = min(SERVED_REQUIREMENTS, key=lambda r: LEVELS.index(CATALOGUE[r].level))
        need = CATALOGUE[first].level
        if LEVELS.index(self.level) < LEVELS.index(need):
            raise SitsUsageError(f"{flag}: the requirements that measure the server ({', '.join(SERVED_REQUIREMENTS)}) "
                                 f"run at level {need} and above ({first} first), and this run is level "
                                 f"{self.level}, so the server would get no request; fix: add --sits-level={need}")

    def inference_options(self) -> Dict[str, Any]:
        return {"endpoint": self.endpoint, "redfish": self.redfish, "endpoint_key": self.endpoint_key,
                "served": self.served, "serve_error": self.serve_error,
                "deployment_accelerators": self.deployment_accelerators(),
                "dataset": str(self.dataset) if self.dataset else None}

    def under_test(self) -> str:
        """What the inference requirements measure in this run, in words (the report's ``run.under_test``)."""
        if self.serve is not None:
            return f"the server under test, launched by the suite: {' '.join(self.serve.command)}"
        if self.endpoint:
            return f"the serving endpoint {self.endpoint}, run by someone else (its cold start is not measured)"
        return ("the suite's built-in model (random weights), not your serving stack: --sits-serve=COMMAND or "
                "--sits-endpoint=URL measures a deployment")

    def deployment_accelerators(self) -> list:
        """The accelerators the server under test uses, whose power is sampled under its load: those named by
        --sits-serve-accelerators (PCI addresses or NVML/amdsmi indices), else every one the profile expects."""
        named = list((self.serve.accelerators if self.serve is not None else None) or [])
        if not self.endpoint or not hasattr(self.platform, "inventory"):
            return []
        accs = self.platform.inventory()["accelerators"]
        if not named:
            return self.expected_accelerators()
        out = []
        for a in accs:
            idx = (a.get("management") or {}).get("index")
            if a.get("bdf") in named or (idx is not None and str(idx) in named):
                out.append(a)
        return out

    def set_golden(self, record: Optional[str], golden: Optional[str]) -> None:
        if record and golden:
            raise SitsUsageError("--sits-golden-record and --sits-golden are exclusive; fix: record on the "
                                 "reference platform, compare on the platform under test")
        if golden:
            from ..equivalence.golden import GoldenError, GoldenSet

            try:
                GoldenSet(Path(golden))
            except GoldenError as exc:
                raise SitsUsageError(f"bad golden set: {exc}") from None
        self.golden_record = Path(record).resolve() if record else None
        self.golden = Path(golden).resolve() if golden else None

    @classmethod
    def resolve(cls, *, profile_opt: Optional[str], profile_ini: Optional[str], platform_opt: Optional[str],
                platform_ini: Optional[str], level_opt: Optional[str], level_ini: Optional[str],
                report_dir_opt: Optional[str], report_dir_ini: Optional[str]) -> SitsRun:
        level, level_how = _pick(level_opt, ENV_LEVEL, level_ini)
        level = level or "quick"
        if level not in LEVELS:
            import difflib

            near = difflib.get_close_matches(str(level), list(LEVELS), n=1, cutoff=0.6)
            raise SitsUsageError(f"unknown level {level!r} (from {level_how}); fix: "
                                 f"{f'did you mean {near[0]!r}? ' if near else ''}use one of {', '.join(LEVELS)}")
        plat_spec, plat_how = _pick(platform_opt, ENV_PLATFORM, platform_ini)
        prof_spec, prof_how = _pick(profile_opt, ENV_PROFILE, profile_ini)
        workdir = Path(tempfile.mkdtemp(prefix="sits-run-")) if (plat_spec or "").startswith("sim:") else None
        try:
            platform = from_spec(plat_spec or "live", workdir=workdir)
            platform.inventory()  # a broken snapshot is a usage error now, not a traceback later
            built_from = getattr(platform, "profile", None)  # a simulated platform's: the profile it was built from
            if prof_spec:
                flag = {"option": "--sits-profile", "env": f"${ENV_PROFILE}", "ini": "sits_profile"}[prof_how]
                profile = resolve(prof_spec, how=prof_how, why=f"{flag}={prof_spec}")
            elif built_from is not None:
                profile = built_from
                profile.how, profile.why = "platform", "the profile the simulated platform was built from"
            else:
                accs = platform.inventory()["accelerators"]
                name, why = auto_pick(accs)
                declared = _declared_pick(platform.inventory()) if platform.kind == "evidence" else None
                if declared is not None:
                    names, said = declared
                    if len(names) != 1:
                        texts = getattr(platform, "path", None)
                        raise SitsUsageError(
                            f"the texts hold no accelerator reading, and the MLPerf systems JSONs declare {said}; "
                            "fix: audit one system's folder" if said.startswith("different systems") else
                            f"the texts hold no accelerator reading, and the MLPerf systems JSON declares {said}; "
                            + ("no bundled profile is for that model" if not names else
                               f"the bundled profiles {', '.join(names)} all name it")
                            + "; fix: --sits-profile=NAME or FILE (`sits audit --profile=...`) with the profile of "
                              "that model" + (f" (`sits profile init --from={texts}` writes one from these texts)"
                                              if texts else ""))
                    name, why = names[0], f"the MLPerf systems JSON declares {said}"
                unknown = _unprofiled(accs) if name == "host" else []
                if unknown:
                    texts = getattr(platform, "path", None)
                    raise SitsUsageError(
                        f"the {'texts show' if platform.kind == 'evidence' else 'machine has'} "
                        f"{'; '.join(unknown)}, and no bundled profile is for that model (they would be judged "
                        "against the host profile, which expects no accelerator); fix: --sits-profile=FILE (`sits audit "
                        "--profile=FILE`) with a profile for it that extends base"
                        + (f" (`sits profile init --from={texts}` writes one from these texts)"
                           if platform.kind == "evidence" and texts else
                           " (`sits profile init --from=FILE` writes one from this machine's `nvidia-smi -q`, "
                           "`rocm-smi` or `lspci -vv` saved in FILE)" if platform.kind == "live" else ""))
                profile = resolve(name, how="auto", why=why)
        except (ProfileError, PlatformError) as exc:
            if workdir is not None:
                shutil.rmtree(workdir, ignore_errors=True)
            raise SitsUsageError(f"bad {'profile' if isinstance(exc, ProfileError) else 'platform'}: {exc}") from None
        rd, _ = _pick(report_dir_opt, ENV_REPORT_DIR, report_dir_ini)
        rd = rd or "sits-report"
        report_dir = None if rd.lower() == "none" else (Path(rd) if Path(rd).is_absolute() else Path.cwd() / rd)
        return cls(profile=profile, platform=platform, level=level, level_how=level_how, report_dir=report_dir,
                   platform_spec=plat_spec or "live", workdir=workdir, owns_workdir=workdir is not None)

    def environment(self) -> Any:
        """The platform's environment sensors, read from the first measured requirement on (None: a platform that
        measures nothing here)."""
        if not self._environment_made:
            self._environment_made = True
            self._environment = self.platform.environment()
        return self._environment

    def close_environment(self) -> None:
        if self._environment is not None:
            self._environment.close()

    def cleanup(self) -> None:
        """Remove the run's scratch folder (the controller's, once its workers are gone)."""
        if self.owns_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def to_workerinput(self) -> Dict[str, Any]:
        """What a worker needs to be the same run (plain JSON for execnet)."""
        return {"profile_path": self.profile.path, "profile_how": self.profile.how, "profile_why": self.profile.why,
                "platform_spec": self.platform_spec, "inventory": self.platform.inventory(), "level": self.level,
                "level_how": self.level_how, "report_dir": str(self.report_dir) if self.report_dir else None,
                "started_at": self.started_at,
                "golden_record": str(self.golden_record) if self.golden_record else None,
                "golden": str(self.golden) if self.golden else None,
                "endpoint": self.endpoint, "redfish_url": (self.redfish or {}).get("url"),
                "workdir": str(self.workdir) if self.workdir else None,
                "endpoint_key": self.endpoint_key, "budget_min": self.budget_min,
                "prometheus": str(self.prometheus) if self.prometheus else None, "watchdog_s": self.watchdog_s,
                "health_load": self.health_load, "served": self.served, "serve_error": self.serve_error,
                "dataset": str(self.dataset) if self.dataset else None}

    @classmethod
    def from_workerinput(cls, data: Dict[str, Any]) -> SitsRun:
        workdir = Path(data["workdir"]) if data.get("workdir") else None
        try:
            platform = from_spec(data["platform_spec"], workdir=workdir)
            profile = resolve(data["profile_path"], how=data["profile_how"], why=data["profile_why"])
        except (ProfileError, PlatformError) as exc:  # pragma: no cover - the controller resolved the same
            raise SitsUsageError(str(exc)) from None
        platform.set_inventory(data["inventory"])
        run = cls(profile=profile, platform=platform, level=data["level"], level_how=data["level_how"],
                  report_dir=Path(data["report_dir"]) if data["report_dir"] else None,
                  started_at=data["started_at"], platform_spec=data["platform_spec"], workdir=workdir)
        run.golden_record = Path(data["golden_record"]) if data["golden_record"] else None
        run.golden = Path(data["golden"]) if data["golden"] else None
        run.set_inference(data.get("endpoint"), data.get("redfish_url"), data.get("endpoint_key"))
        run.set_operations(data.get("prometheus"), data.get("watchdog_s"), data.get("health_load"))
        run.budget_min = data.get("budget_min")
        run.served, run.serve_error = data.get("served"), data.get("serve_error")
        run.dataset = Path(data["dataset"]) if data.get("dataset") else None
        return run

    def expected(self) -> Dict[str, Any]:
        """What the profile says should be installed, for the checks."""
        return self.profile.expected()

    def expected_accelerators(self) -> list:
        """The accelerators present that match the profile's PCI IDs (the ones its requirements judge)."""
        from ..checks.inventory import is_profiled

        expected = self.profile.expected()
        return [a for a in self.platform.inventory()["accelerators"] if is_profiled(a, expected)]
