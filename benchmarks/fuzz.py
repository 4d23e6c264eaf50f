"""Fuzzed profiles and snapshots: the figures of the "untrusted input" issue, in one command.

    python benchmarks/fuzz.py                       # 1 200 profiles, 45 snapshot mutations, 30 sim runs
    python benchmarks/fuzz.py --n 300 --runs 10     # quicker
    python benchmarks/fuzz.py --against HEAD        # the same corpus on a git revision too, side by side

Profiles: a seeded corpus of careless and hostile files (valid ones with values drawn inside the schema's
bounds, hostile values at every kind of leaf, NaN and infinities, counts and durations beyond the limits,
bands inverted across ``extends``, window_s > timeout_s, duplicate PCI IDs, tags, aliases and alias bombs, deep
nesting, bad UTF-8, truncation, long or hostile ``extends``, random bytes).  Each goes through
``sits profile validate`` in worker processes limited to 1 GiB of address space (RLIMIT_AS); a file that runs
longer than --timeout seconds kills its worker, so that a bomb cannot take the machine down.  Memory is the
workers' peak resident set (ru_maxrss), an upper bound of every file's peak.  A sample of the files that
validate then runs the quick suite on the simulated platform built from them (``--sits-platform sim:FILE``).

Snapshots: a snapshot of a simulated two-GPU machine, mutated (links out of it, /dev/zero, FIFOs, huge sparse
files, garbage values, odd nvml.json shapes, deep folders), is read in a child process (platform, inventory,
management facts) with the same limits; a canary file outside must never appear, and an audit hook lists every
file opened by absolute path outside the snapshot.

Goals (the issue's): 0 tracebacks, every bad file exit 4 in < 2 s and < 200 MB, nothing accepted silently, no
run ending in INTERNALERROR, nothing read outside a snapshot.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import queue
import random
import resource
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parent.parent
MEMORY_LIMIT = 1 << 30
CANARY = "CANARY-0c9f5e21"

# --------------------------------------------------------------------------
# Child processes: a validation worker and a snapshot reader


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def worker() -> None:
    """Validate the profile files named on stdin, one JSON line per file on stdout."""
    from pytest_sits.cli import main

    for line in sys.stdin:
        path = json.loads(line)["path"]
        out, err = io.StringIO(), io.StringIO()
        rc: Optional[int] = None
        tb = None
        t0 = time.perf_counter()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = main(["profile", "validate", path])
        except BaseException:  # noqa: B036 - SystemExit and MemoryError are findings too
            tb = traceback.format_exc()[-3000:]
        secs = time.perf_counter() - t0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(json.dumps({"rc": rc, "secs": secs, "rss": rss, "stderr": err.getvalue()[-6000:], "traceback": tb}),
              flush=True)
        if tb:
            return  # a fresh worker after any exception (a MemoryError leaves this one in an unknown state)


def snapshot_child(folder: str) -> None:
    """Read one snapshot; print what happened as JSON."""
    opened: List[str] = []

    def hook(name: str, args: Any) -> None:
        if name == "open" and isinstance(args[0], (str, bytes)):
            path = os.fsdecode(args[0])
            if os.path.isabs(path):
                opened.append(path)

    sys.addaudithook(hook)
    import pytest_sits
    from pytest_sits.platforms import PlatformError
    from pytest_sits.platforms.snapshot import SnapshotPlatform

    allowed = [os.path.realpath(folder), os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix),
               os.path.dirname(os.path.realpath(pytest_sits.__file__)), os.path.realpath(__file__)]
    result: Dict[str, Any] = {"outcome": "built", "message": "", "traceback": None}
    t0 = time.perf_counter()
    text = ""
    try:
        plat = SnapshotPlatform(Path(folder))
        text = json.dumps([plat.label, plat.inventory(), plat.nvml(), plat.amdsmi()], default=str)
    except PlatformError as exc:
        result.update(outcome="PlatformError", message=str(exc)[:2000])
        text = str(exc)
    except BaseException:  # noqa: B036
        result.update(outcome="exception", traceback=traceback.format_exc()[-3000:])
        text = result["traceback"]
    result["secs"] = time.perf_counter() - t0
    result["canary"] = CANARY in text
    result["outside"] = sorted({p for p in opened if not any(
        os.path.realpath(p) == a or os.path.realpath(p).startswith(a + os.sep) for a in allowed)})[:20]
    print(json.dumps(result), flush=True)


# --------------------------------------------------------------------------
# The profile corpus


def _leaves(schema: Dict[str, Any], path: Tuple = ()) -> List[Tuple[Tuple, Dict[str, Any]]]:
    if "properties" in schema:
        return [leaf for k, sub in schema["properties"].items() for leaf in _leaves(sub, path + (k,))]
    types = schema.get("type")
    types = types if isinstance(types, list) else [types]
    return [(path, schema)] if {"number", "integer", "boolean"} & set(types) else []


def _types(schema: Dict[str, Any]) -> List[str]:
    t = schema.get("type")
    return t if isinstance(t, list) else [t]


def _within(rng: random.Random, schema: Dict[str, Any]) -> Any:
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if "boolean" in _types(schema):
        return rng.random() < 0.5
    lo = schema.get("minimum", schema.get("exclusiveMinimum", 0))
    hi = schema.get("maximum", schema.get("exclusiveMaximum", 1e6))
    if "integer" in _types(schema):
        lo = int(lo) + ("exclusiveMinimum" in schema)
        # mostly small values, sometimes the extremes
        return rng.choice([lo, int(hi), rng.randint(lo, min(int(hi), lo + 100)), rng.randint(lo, int(hi))])
    value = rng.choice([hi, rng.uniform(lo, hi), rng.uniform(lo, min(hi, lo + 10))])
    return value if value > lo or "exclusiveMinimum" not in schema else hi


def _set(data: Dict[str, Any], path: Tuple, value: Any) -> Dict[str, Any]:
    out = json.loads(json.dumps(data, allow_nan=True))
    cur = out
    for key in path[:-1]:
        if not isinstance(cur.get(key), dict):
            cur[key] = {}
        cur = cur[key]
    cur[path[-1]] = value
    return out


def _dump(data: Any) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10_000)


BASE = {"name": "lab", "extends": "h100", "identity": {"count": 4},
        "thresholds": {"MEM-CAPACITY": {"min_gb_per_card": 60}}}
HOSTILE = [math.nan, math.inf, -math.inf, 1e300, -1e300, 10 ** 30, 2 ** 63, 5.0, -1, 0, "", "x" * 5000, [], {},
           None, True, "1e999", [1] * 100, {"a": {"b": 1}}, "\u202e"]
#: Values the issue found accepted, then hanging, exhausting or crashing a run.
OVER_LIMIT = [(("hardware", "pcie_gen"), 7), (("hardware", "peer_link", "links"), 100_000_000),
              (("thresholds", "TOPO-PCIE-LINK", "samples"), 100_000_000),
              (("thresholds", "THERM-GPU-STEADY", "window_s"), 1e12),
              (("thresholds", "THERM-GPU-STEADY", "timeout_s"), 1e12),
              (("thresholds", "MEM-BW-HOLD", "duration_s"), 1e9),
              (("thresholds", "TOPO-PCIE-BW", "bytes"), 1 << 50), (("identity", "count"), 100_000),
              (("hardware", "memory_gb"), 1e300), (("hardware", "tdp_w"), 1e300)]
TAGS = ["!!float ", "!!int ", "!!bool ", "!!binary ", "!!timestamp ", "!!set ", "!!python/object/apply:os.system ",
        "!foo ", "!!map ", "!!seq "]
BOMB = ('a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n'
        'c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n'
        'f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n'
        'i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n')
EXTENDS = ["/etc/shadow", "/etc/passwd", "../" * 30 + "etc/shadow", "a" * 5000, "../secrets.yaml", "link.yaml",
           "/dev/zero", ".", "p.yaml", "~/.ssh/id_rsa", "x\\0.yaml"]


def corpus(n: int, seed: int) -> List[Dict[str, Any]]:
    """``n`` entries: {"files": {name: bytes}, "kind": ..., "must_refuse": bool}."""
    from pytest_sits.profiles import profile_schema

    rng = random.Random(seed)
    leaves = _leaves(profile_schema())
    numeric = [(p, s) for p, s in leaves if {"number", "integer"} & set(_types(s)) and "enum" not in s]
    quick = {"INV-DEVICES", "TOPO-PCIE-DIRECT", "TOPO-PCIE-LINK", "TOPO-NUMA-BIND", "MEM-CAPACITY",
             "LINK-NVLINK-MESH"}
    runnable = [(p, s) for p, s in leaves if p[0] == "hardware" or (p[0] == "thresholds" and p[1] in quick)]
    kinds = (["valid"] * 20 + ["hostile-value"] * 18 + ["nonfinite"] * 8 + ["over-limit"] * 8 + ["band"] * 6
             + ["window"] * 4 + ["pci-ids"] * 4 + ["text"] * 22 + ["bytes"] * 10)
    out = []
    for i in range(n):
        kind = rng.choice(kinds)
        files: Dict[str, Any] = {}
        data: Dict[str, Any] = json.loads(json.dumps(BASE))
        if kind == "valid":
            data = {"name": f"valid-{i}", "extends": rng.choice(["h100", "h100-pcie", "a100", "l40s", "host", "h200"]),
                    "identity": {"count": rng.randint(0, 4)}}
            for _ in range(rng.randint(1, 10)):
                path, schema = rng.choice(runnable)
                data = _set(data, path, _within(rng, schema))
            files["p.yaml"] = _dump(data)
        elif kind == "hostile-value":
            for _ in range(rng.randint(1, 3)):
                path, _ = rng.choice(leaves)
                data = _set(data, path, rng.choice(HOSTILE + [rng.uniform(-1e6, 1e6), rng.randint(-10, 10 ** 6)]))
            files["p.yaml"] = _dump(data)
        elif kind == "nonfinite":
            path, _ = rng.choice(numeric)
            token = rng.choice([".nan", ".inf", "-.inf", "1e400", ".NaN"])
            files["p.yaml"] = _dump(_set(data, path, "@@@")).replace("'@@@'", token)
        elif kind == "over-limit":
            if rng.random() < 0.5:
                path, value = rng.choice(OVER_LIMIT)
            else:
                path, schema = rng.choice(numeric)
                top = schema.get("maximum", schema.get("exclusiveMaximum"))
                value = int(top) + 1 if "integer" in _types(schema) else top * 10 + 1
            files["p.yaml"] = _dump(_set(data, path, value))
        elif kind == "band":
            req, lo_key, hi_key, lo, hi = rng.choice([("MEM-BW-HOLD", "band_low", "band_high", 0.0, 1.0),
                                                      ("THERM-GPU-STEADY", "band_low_c", "band_high_c", 20, 100),
                                                      ("THERM-CPU-STEADY", "band_low_c", "band_high_c", 20, 100)])
            high = round(rng.uniform(lo, hi), 3)
            files["parent.yaml"] = _dump({"name": "parent", "extends": "h100", "thresholds": {req: {hi_key: high}}})
            files["p.yaml"] = _dump({"name": "child", "extends": "parent.yaml",
                                     "thresholds": {req: {lo_key: round(rng.uniform(high, hi), 3)}}})
        elif kind == "window":
            req = rng.choice(["THERM-GPU-STEADY", "THERM-CPU-STEADY"])
            window = round(rng.uniform(2, 3600), 2)
            files["parent.yaml"] = _dump({"name": "parent", "extends": "h100",
                                          "thresholds": {req: {"timeout_s": round(window * rng.uniform(0.01, 0.99), 2)}}})
            files["p.yaml"] = _dump({"name": "child", "extends": "parent.yaml", "thresholds": {req: {"window_s": window}}})
        elif kind == "pci-ids":
            ids = [f"10de:{rng.randint(0, 0xffff):04x}" for _ in range(rng.randint(1, 4))]
            files["p.yaml"] = _dump(_set(data, ("identity", "pci_ids"), ids + [rng.choice(ids)]))
        elif kind == "text":
            text = _dump(data)
            edit = rng.choice(["tag", "truncate", "byte", "nest", "bomb", "extends", "documents", "utf8", "long"])
            if edit == "tag":
                lines = text.splitlines(keepends=True)
                j = rng.randrange(len(lines))
                head, sep, tail = lines[j].partition(": ")
                lines[j] = head + sep + rng.choice(TAGS) + tail if sep else lines[j]
                files["p.yaml"] = "".join(lines)
            elif edit == "truncate":
                files["p.yaml"] = text[:rng.randrange(len(text))]
            elif edit == "byte":
                b = bytearray(text.encode())
                b[rng.randrange(len(b))] = rng.randrange(256)
                files["p.yaml"] = bytes(b)
            elif edit == "nest":
                depth = rng.choice([20, 500, 1000, 5000, 100_000])
                files["p.yaml"] = text + "deep: " + "[" * depth + "]" * depth + "\n"
            elif edit == "bomb":
                files["p.yaml"] = text + BOMB
            elif edit == "extends":
                files["p.yaml"] = text.replace("extends: h100", "extends: " + rng.choice(EXTENDS))
            elif edit == "documents":
                files["p.yaml"] = text + "---\n" + text
            elif edit == "utf8":
                files["p.yaml"] = text.encode() + rng.choice([b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"\x00"])
            else:
                files["p.yaml"] = text + "description: " + "y" * rng.choice([5000, 50_000, 900_000]) + "\n"
        else:
            files["p.yaml"] = bytes(rng.randrange(256) for _ in range(rng.randint(0, 2000)))
        out.append({"files": files, "kind": kind, "must_refuse": kind in ("nonfinite", "over-limit", "band",
                                                                           "window", "pci-ids")})
    return out


def write_corpus(entries: List[Dict[str, Any]], root: Path) -> List[Path]:
    root.mkdir()
    (root / "secrets.yaml").write_text(f"database:\n  password: {CANARY}\n")
    paths = []
    for i, entry in enumerate(entries):
        folder = root / f"{i:05d}"
        folder.mkdir()
        for name, data in entry["files"].items():
            (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
        os.symlink(root / "secrets.yaml", folder / "link.yaml")
        paths.append(folder / "p.yaml")
    return paths


# --------------------------------------------------------------------------
# Running a tree (this checkout, or a revision extracted with `git archive`)


def tree_env(tree: Path) -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    env.pop("SITS_PROFILE", None)
    env.pop("SITS_PLATFORM", None)
    return env


def extract(rev: str, dest: Path) -> Path:
    """The package at ``rev`` (read with `git archive`), laid out so that it imports from ``dest``."""
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    for pkg, folder in (("bundled", "profiles"), ("conformance", "conformance")):
        if (dest / folder).is_dir() and not (dest / "pytest_sits" / pkg).exists():
            shutil.copytree(dest / folder, dest / "pytest_sits" / pkg)
    return dest


def validate_all(paths: List[Path], tree: Path, workers: int, timeout: float) -> List[Dict[str, Any]]:
    results: List[Optional[Dict[str, Any]]] = [None] * len(paths)
    todo: queue.Queue[int] = queue.Queue()
    for i in range(len(paths)):
        todo.put(i)

    def start() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, __file__, "--worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True, env=tree_env(tree), preexec_fn=_limit_memory, cwd=str(tree))

    def run() -> None:
        proc = start()
        while True:
            try:
                i = todo.get_nowait()
            except queue.Empty:
                break
            proc.stdin.write(json.dumps({"path": str(paths[i])}) + "\n")
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], timeout)
            line = proc.stdout.readline() if ready else ""
            if line:
                results[i] = json.loads(line)
            else:  # past the timeout, or killed (the kernel's OOM killer, a signal)
                proc.kill()
                proc.wait()
                results[i] = {"rc": None, "secs": timeout if not ready else None, "rss": None, "stderr": "",
                              "traceback": None, "killed": "timeout" if not ready else f"exit {proc.returncode}"}
            if proc.poll() is not None or results[i].get("traceback") or results[i].get("killed"):
                proc.kill()
                proc.wait()
                proc = start()
        proc.stdin.close()
        proc.wait()

    threads = [threading.Thread(target=run) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results  # type: ignore[return-value]


def sim_runs(paths: List[Path], tree: Path, workers: int, timeout: float) -> List[str]:
    """The quick suite on the simulated machine built from each profile: 'ok', 'failed', 'INTERNALERROR',
    'usage error', 'timeout' or 'exit N'."""
    out: List[str] = [""] * len(paths)
    todo: queue.Queue[int] = queue.Queue()
    for i in range(len(paths)):
        todo.put(i)

    def run() -> None:
        while True:
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            with tempfile.TemporaryDirectory() as cwd:
                try:
                    proc = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "pytest_sits.conformance", "-q",
                                           "-p", "no:cacheprovider", f"--sits-platform=sim:{paths[i]}",
                                           "--sits-report-dir=none"], cwd=cwd, env=tree_env(tree),
                                          capture_output=True, text=True, timeout=timeout)
                    rc = proc.returncode
                    internal = "INTERNALERROR" in proc.stdout + proc.stderr or "Traceback" in proc.stderr
                    out[i] = ("INTERNALERROR" if rc == 3 or internal else f"killed by signal {-rc}" if rc < 0
                              else {0: "ok", 1: "failed", 4: "usage error"}.get(rc, f"exit {rc}"))
                except subprocess.TimeoutExpired:
                    out[i] = "timeout"

    threads = [threading.Thread(target=run) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


# --------------------------------------------------------------------------
# Snapshot mutations


def snapshot_mutations(base: Path, count: int, seed: int) -> Tuple[Path, Dict[str, Any], List[Tuple[str, list]]]:
    """The base snapshot, the world around it (canary outside), and named lists of edits: the 37 the issue
    lists, then random ones up to ``count``."""
    sys.path.insert(0, str(REPO / "tests"))
    from pytest_sits.platforms import from_spec
    from pytest_sits.platforms.snapshot import capture

    (base / "two.yaml").write_text("name: two\nextends: h100\nidentity:\n  count: 2\n")
    sim = from_spec(f"sim:{base / 'two.yaml'}")
    snap = base / "snap"
    capture(snap, root=sim.root, nvml=sim.nvml())
    outside = base / "outside"
    node = outside / "sys/devices/system/node/node0"
    node.mkdir(parents=True)
    (outside / "proc").mkdir()
    (outside / "canary.txt").write_text(CANARY + "\n")
    (outside / "proc/cpuinfo").write_text(f"processor\t: 0\nmodel name\t: {CANARY}\nphysical id\t: 0\n")
    (outside / "proc/meminfo").write_text("MemTotal: 1 kB\n")
    (node / "cpulist").write_text("0\n")
    (node / "meminfo").write_text(f"Node 0 MemTotal: 1 kB {CANARY}\n")
    world = {"base": base, "snap": snap, "outside": outside,
             "entries": sorted(str(p.relative_to(snap)) for p in snap.rglob("*"))}
    dev = "fs/sys/devices/pci0000:10/0000:10:01.0/0000:11:00.0"
    named: List[Tuple[str, list]] = [
        ("cpuinfo -> canary (absolute link)", [("link", "fs/proc/cpuinfo", "canary")]),
        ("cpuinfo -> canary (relative link)", [("link", "fs/proc/cpuinfo", "canary-rel")]),
        ("cpuinfo -> /dev/zero", [("link", "fs/proc/cpuinfo", "/dev/zero")]),
        ("cpuinfo is a FIFO", [("fifo", "fs/proc/cpuinfo", None)]),
        ("cpuinfo of 10 GiB (sparse)", [("sparse", "fs/proc/cpuinfo", None)]),
        ("meminfo: MemTotal of 5 000 digits", [("write", "fs/proc/meminfo", "MemTotal: " + "9" * 5000 + " kB\n")]),
        ("cpulist 0-999999999", [("write", "fs/sys/devices/system/node/node0/cpulist", "0-999999999")]),
        ("cpulist of random bytes", [("write", "fs/sys/devices/system/node/node0/cpulist", os.urandom(300))]),
        ("node folder -> outside", [("link", "fs/sys/devices/system/node", "outside")]),
        ("node folder -> /sys/devices/system/node", [("link", "fs/sys/devices/system/node", "/sys/devices/system/node")]),
        ("pci devices folder -> /sys/bus/pci/devices", [("link", "fs/sys/bus/pci/devices", "/sys/bus/pci/devices")]),
        ("device link -> outside", [("link", "fs/sys/bus/pci/devices/0000:11:00.0", "outside")]),
        ("device link loops", [("link", "fs/sys/bus/pci/devices/0000:11:00.0", "loop")]),
        ("numa_node of 5 000 digits", [("write", dev + "/numa_node", "9" * 5000)]),
        ("numa_node 'x'", [("write", dev + "/numa_node", "x")]),
        ("class 0x + 5 000 hex digits", [("write", dev + "/class", "0x" + "f" * 5000)]),
        ("config of random bytes", [("write", dev + "/config", os.urandom(300))]),
        ("config of 4 097 bytes", [("write", dev + "/config", b"\xff" * 4097)]),
        ("config -> /dev/zero", [("link", dev + "/config", "/dev/zero")]),
        ("current_link_speed '1.2.3 GT/s'", [("write", dev + "/current_link_speed", "1.2.3 GT/s PCIe")]),
        ("max_link_speed of 100 000 digits", [("write", dev + "/max_link_speed", "9" * 100_000)]),
        ("vendor empty", [("write", dev + "/vendor", "")]),
        ("nvml.json -> /dev/zero", [("link", "nvml.json", "/dev/zero")]),
        ("nvml.json -> canary", [("link", "nvml.json", "canary")]),
        ("nvml.json is a FIFO", [("fifo", "nvml.json", None)]),
        ("nvml.json nested 100 000 deep", [("write", "nvml.json", "[" * 100_000 + "]" * 100_000)]),
        ("nvml.json with NaN", [("write", "nvml.json", '{"devices": [], "x": NaN}')]),
        ("nvml.json devices of wrong shapes", [("write", "nvml.json", json.dumps(
            {"available": True, "devices": [{"pci_bus_id": "0000:11:00.0", "memory_total_bytes": -1}, 7]}))]),
        ("nvml.json of 300 MB (sparse)", [("sparse", "nvml.json", None)]),
        ("manifest.json is []", [("write", "manifest.json", "[]")]),
        ("manifest.json is a FIFO", [("fifo", "manifest.json", None)]),
        ("manifest.json of another format", [("write", "manifest.json", '{"format": "other/9"}')]),
        ("fs -> outside", [("link", "fs", "outside")]),
        ("fs -> /", [("link", "fs", "/")]),
        ("node folder -> 100 levels deep inside", [("deep", "fs/sys/devices/system/node/node0", None)]),
        ("hostname of 1 MB", [("write", "fs/proc/sys/kernel/hostname", "h" * (1 << 20))]),
        ("nvml.json -> canary (relative link)", [("link", "nvml.json", "canary-rel")]),
    ]
    rng = random.Random(seed)
    kinds = ["garbage", "link", "swap", "delete", "deep", "sparse"]
    while len(named) < count:
        edits = []
        for _ in range(rng.randint(1, 4)):
            kind, entry = rng.choice(kinds), rng.choice(world["entries"])
            payload: Any = None
            if kind == "garbage":
                payload = rng.choice([os.urandom(rng.randint(0, 600)), "-1", "0-65535,70000", "0x", "", "9" * 5000])
            elif kind == "link":
                payload = rng.choice(["canary", "canary-rel", "outside", "outside-rel", "/dev/zero", "/", "loop",
                                      "sibling", "missing"])
            edits.append((kind, entry, payload))
        named.append((f"random edits {edits!r}"[:90], edits))
    return snap, world, named


def apply_edits(folder: Path, world: Dict[str, Any], edits: list) -> None:
    from test_fuzz_snapshots import apply  # tests/: the mutations the unit tests apply

    for kind, entry, payload in edits:
        path = folder / entry
        if kind == "write":
            path.unlink()
            path.write_bytes(payload if isinstance(payload, bytes) else payload.encode())
        elif kind == "sparse" and entry.endswith(".json"):
            path.unlink()
            with open(path, "wb") as fh:
                fh.truncate(300 << 20)
        elif kind == "fifo":
            path.unlink()
            os.mkfifo(path)
        else:
            apply(folder, world, [(kind, entry, payload)])


def read_snapshots(world: Dict[str, Any], mutations: List[Tuple[str, list]], tree: Path,
                   timeout: float) -> List[Dict[str, Any]]:
    out = []
    for name, edits in mutations:
        folder = Path(tempfile.mkdtemp(prefix="m-", dir=world["base"]))
        shutil.copytree(world["snap"], folder, symlinks=True, dirs_exist_ok=True)
        apply_edits(folder, world, edits)
        t0 = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, __file__, "--snapshot-child", str(folder)], env=tree_env(tree),
                                  capture_output=True, text=True, timeout=timeout, preexec_fn=_limit_memory)
            res = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {
                "outcome": f"killed (exit {proc.returncode})", "canary": False, "outside": [], "secs": None}
        except subprocess.TimeoutExpired:
            res = {"outcome": "hang", "canary": False, "outside": [], "secs": timeout}
        res["wall"] = time.perf_counter() - t0
        res["name"] = name
        out.append(res)
        shutil.rmtree(folder, ignore_errors=True)
    return out


# --------------------------------------------------------------------------
# Figures


def secret_lines() -> List[str]:
    lines = []
    for f in ("/etc/shadow", "/etc/passwd"):
        try:
            lines += [ln for ln in Path(f).read_text().splitlines() if len(ln) >= 8]
        except OSError:
            pass
    return lines


def figures(entries: List[Dict[str, Any]], results: List[Dict[str, Any]], runs: List[str],
            snaps: List[Dict[str, Any]]) -> Dict[str, str]:
    secrets = secret_lines()
    tracebacks = [i for i, r in enumerate(results) if r.get("traceback") or (r.get("killed") or "").startswith("exit")]
    slow = [r for r in results if (r.get("secs") or 0) >= 2]
    must = [i for i, e in enumerate(entries) if e["must_refuse"]]
    silent = [i for i in must if results[i].get("rc") == 0]
    valid = [i for i, e in enumerate(entries) if e["kind"] == "valid"]
    echoed = [i for i, r in enumerate(results) if CANARY in r.get("stderr", "")
              or any(s in r.get("stderr", "") for s in secrets)]
    rss = max((r.get("rss") or 0) for r in results)
    limit_hit = sum(1 for r in results if "MemoryError" in (r.get("traceback") or ""))
    worst = max(results, key=lambda r: r.get("secs") or 0)
    fig = {
        "profiles fuzzed": f"{len(entries)}",
        "tracebacks (or crashed workers)": f"{len(tracebacks)}",
        "max seconds per file": f"{worst.get('secs') or 0:.2f}" + (" (killed)" if worst.get("killed") else ""),
        "files taking >= 2 s": f"{len(slow)}",
        "peak memory of a validating process": f"{rss / 2 ** 20:.0f} MB" + (f" ({limit_hit} hit the 1 GiB limit)"
                                                                           if limit_hit else ""),
        "exit codes other than 0/4": f"{sum(1 for r in results if r.get('rc') not in (0, 4))}",
        "must-refuse files accepted silently": f"{len(silent)} / {len(must)}",
        "valid files refused": f"{sum(1 for i in valid if results[i].get('rc') != 0)} / {len(valid)}",
        "messages quoting a file that is no profile": f"{len(echoed)}",
    }
    if runs:
        counts = {k: runs.count(k) for k in sorted(set(runs))}
        fig["sim quick runs ending in INTERNALERROR"] = f"{counts.get('INTERNALERROR', 0)} / {len(runs)}"
        fig["sim quick runs, all outcomes"] = ", ".join(f"{k} {v}" for k, v in counts.items())
    if snaps:
        fig["snapshot mutations"] = f"{len(snaps)}"
        fig["  read outside the snapshot"] = f"{sum(1 for s in snaps if s['canary'] or s['outside'])}"
        fig["  tracebacks"] = f"{sum(1 for s in snaps if s['outcome'] == 'exception' or s['outcome'].startswith('killed'))}"
        fig["  hangs (past the timeout)"] = f"{sum(1 for s in snaps if s['outcome'] == 'hang')}"
        fig["  built / refused (PlatformError)"] = (f"{sum(1 for s in snaps if s['outcome'] == 'built')} / "
                                                   f"{sum(1 for s in snaps if s['outcome'] == 'PlatformError')}")
        fig["  max seconds per snapshot"] = f"{max(s['wall'] for s in snaps):.2f}"
    return fig


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1200, help="profiles to fuzz (default 1200)")
    ap.add_argument("--snapshots", type=int, default=45, help="snapshot mutations (the 37 named ones, then random "
                                                               "ones up to this number; default 45)")
    ap.add_argument("--runs", type=int, default=30, help="profiles that validate to run on sim (default 30)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds before a file's worker is killed")
    ap.add_argument("--run-timeout", type=float, default=300.0, help="seconds for one sim run")
    ap.add_argument("--workers", type=int, default=max(1, min(4, os.cpu_count() or 1)))
    ap.add_argument("--against", metavar="REV", help="also measure this git revision (read with `git archive`)")
    ap.add_argument("--verbose", action="store_true", help="list every finding")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--snapshot-child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker()
        return 0
    if args.snapshot_child:
        snapshot_child(args.snapshot_child)
        return 0

    sys.path.insert(0, str(REPO))
    work = Path(tempfile.mkdtemp(prefix="sits-fuzz-"))
    try:
        trees = [("this tree", REPO)]
        if args.against:
            trees.append((args.against, extract(args.against, work / "against")))
        entries = corpus(args.n, args.seed)
        paths = write_corpus(entries, work / "corpus")
        snap_root = work / "snapshots"
        snap_root.mkdir()
        _, world, mutations = snapshot_mutations(snap_root, args.snapshots, args.seed)
        columns = []
        for label, tree in trees:
            t0 = time.time()
            print(f"[{label}] validating {len(paths)} profiles ...", file=sys.stderr, flush=True)
            results = validate_all(paths, tree, args.workers, args.timeout)
            ok = [p for p, r in zip(paths, results) if r.get("rc") == 0]
            sample = random.Random(args.seed).sample(ok, min(args.runs, len(ok)))
            print(f"[{label}] {len(sample)} sim runs ...", file=sys.stderr, flush=True)
            runs = sim_runs(sample, tree, max(1, args.workers // 2), args.run_timeout)
            print(f"[{label}] {len(mutations)} snapshot mutations ...", file=sys.stderr, flush=True)
            snaps = read_snapshots(world, mutations, tree, args.timeout)
            columns.append((label, figures(entries, results, runs, snaps)))
            print(f"[{label}] {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
            if args.verbose:
                for i, r in enumerate(results):
                    bad = r.get("traceback") or r.get("killed") or (entries[i]["must_refuse"] and r.get("rc") == 0)
                    if bad:
                        print(f"--- {label} {paths[i]} ({entries[i]['kind']}): rc={r.get('rc')} "
                              f"{(r.get('traceback') or r.get('killed') or 'accepted')[-300:]}")
                for s in snaps:
                    if s["outcome"] not in ("built", "PlatformError") or s["canary"] or s["outside"]:
                        print(f"--- {label} snapshot {s['name']}: {s['outcome']} canary={s['canary']} "
                              f"outside={s['outside'][:2]} {(s.get('traceback') or '')[-200:]}")
        keys = list(columns[0][1])
        width = max(map(len, keys)) + 2
        print(f"{'figure':{width}}" + "".join(f"{label:>34}" for label, _ in columns))
        for k in keys:
            print(f"{k:{width}}" + "".join(f"{col.get(k, ''):>34}" for _, col in columns))
        print("goals: 0 tracebacks; every bad file exit 4 in < 2 s and < 200 MB; nothing accepted silently; "
              "no INTERNALERROR; nothing read outside a snapshot")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
