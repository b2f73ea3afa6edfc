"""Sweeps of drift debates against a hosted API, simulated on loopback: what
the launchers cost when every cell waits on the provider.

A ``ProviderSim`` (tests/provider_sim.py: OpenAI's wire format, the scripted
model's words, per-key RPM/TPM over a sliding window, a billing ledger)
answers each call after ``--latency`` seconds (0.5). Each sweep is the real
``python -m harness.run -m ...`` command, ``model=openai model.spec=openai:sim``
pointed at the simulator, cells ``llm.temperature`` (4 values) x
``replicates=N/4``, ``rounds=R``, each sweep under its own API key (so the
simulator bills each apart) and in its own temporary ``hydra.sweep.dir``.

0. Driver CPU a call: the same sweep on the scripted model at zero latency,
   one cell and N cells, each command in its own process; (user + sys) of the
   N-cell command over its calls (start-up included; goal <= 2 ms), and the
   marginal figure (what the other N - 1 cells added, over their calls). Then
   the N-cell command again under ``memory.fsync=round``, and again with its
   folders on tmpfs (``/dev/shm``), where fsyncs and new files cost next to
   nothing: the difference is the disk's share, the rest the driver's own.
   Each of these four commands runs ``--cpu-repeats`` times (3; 1 with
   ``--quick``), one of each in turn, and the least CPU of each is printed
   with the range: the host's noise only adds CPU to the same work. Before
   and after them, the CPU of a fixed Python loop (``host_probe``): the
   machine's own speed then, which moved by a third within an hour on a
   2-core VM at a load of 0.1-1.2, so figures of two sittings compare only
   beside it.
   0b. The issue's own shape of the whole-process ratio: the scripted model
   sleeping ``--latency`` a call (no HTTP, as inspect_ai's sleeping ModelAPI),
   the N-cell (and ``--big``) command's wall over the 1-cell command's; then
   each ``--big`` sweep again in one driver process a core
   (``sweep.processes``).
1. Unlimited: the simulator without limits. The whole-process ratio: the
   N-cell command's wall over the 1-cell command's, each timed alone in its
   own process in the same run of this script, start-up included (goal <= 1.10
   at 64 cells, <= 1.25 at 256: ``--big``), for the in-process launcher
   (``sweep.concurrency=N model.concurrency=N model.max_concurrency=N``) and
   the process launcher (``hydra/launcher=joblib hydra.launcher.n_jobs=N``).
   Beside it, wall over the longest cell (which the load itself slows) and
   the driver's CPU a call, when the first cell started, how far the last
   start lagged the first, and the exit's lag. Then inspect_ai on the same
   shape (benchmarks/inspect_side.py: N samples of one cell's calls on a
   ``ModelAPI`` sleeping ``--latency``, max_connections=N), one sample and N
   samples each in its own process: its ratio and memory a sample; skipped
   with a line when inspect_ai is not installed (the ``compare`` extra).
2. At the provider's limit: the in-process sweep again, the simulator's RPM
   and TPM each set to a third of the demand the unlimited in-process sweep
   made (its calls, and tokens charged on admission, over its longest cell),
   over a SHORT sliding window (``--window``, 2 s; a 60 s window would not
   bind before these sweeps end) with the limit scaled to it, and
   ``model.rpm`` / ``model.tpm`` set to the same rate per minute. Prints wall
   divided by the limit's own minimum (calls / RPM rate or charged tokens /
   TPM rate, whichever is larger; a sliding window also admits its first
   window's worth at once, so the true floor is a little lower, printed
   too), failed cells (``sweep.json``) and the 429s the simulator answered.
   Goal <= 1.15 with 0 failed cells.
3. Memory: the driver's peak RSS (the kernel's high-water mark, ``wait4``'s
   ``ru_maxrss``: polls every 0.2 s missed the ~50 MB of pyarrow's import at a
   sweep's end in one run and caught it in another) above a base,
   divided by the cells in flight, in-process; the base is the peak RSS of
   the 1-cell in-process sweep's driver. For the process launcher, the peak
   of the summed RSS of the driver and every worker, per cell (summed RSS
   counts shared library pages once in every process). Goal <= 1 MB a cell in-process
   (the process launcher holds about 110 MB a cell).
4. Sustained: ``--rpm-cells`` cells (256) against a simulator limited to
   ``--rpm`` (10,000) requests a minute, ``model.rpm`` the same: the RPM
   reached, wall over the limit's own minimum (calls / rate), 429s and failed
   cells (goal 0), and the rate sustained once the calls flow (the middle
   80% of the simulator's admissions); once in one driver process and once in two
   (``--processes 1 2``: ``sweep.processes=2``, each process holding half of
   ``model.rpm``, one simulator key and bill for both; ``--ray``: two Ray
   workers on a local cluster, ``sweep.engine=ray``).
5. Ledger: per sweep, the harness's tokens (``counts.input_tokens`` +
   ``output_tokens`` over every cell's manifest) against what the simulator
   billed that sweep's key: "equal" or "differ".

    python benchmarks/api_sweep.py               # 64 cells x 5 rounds (the issue's figure)
    python benchmarks/api_sweep.py --quick       # 12 cells x 2 rounds, no 256-cell or 10,000 RPM sweep
    python benchmarks/api_sweep.py --cells 32 --rounds 3 --window 5 --skip-process
    python benchmarks/api_sweep.py --only-rpm --rounds 3   # the 10,000 RPM runs, 1 and 2 processes
    python benchmarks/api_sweep.py --only-cpu     # phase 0 alone: the driver's CPU a call, and the disk's share
    python benchmarks/api_sweep.py --only-rpm --rounds 3 --ray   # 1 process, then 2 Ray workers (the ray extra)

The process launcher's 64-cell sweep peaked at 8.6 GB of summed RSS. Every sweep's folder
is kept until the script ends (``KEPT``). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from provider_sim import Decision, ProviderSim  # noqa: E402

from harness.sweep.cell_status import EVENTS_JSONL  # noqa: E402
from harness.sweep.index import read_index  # noqa: E402

TEMPERATURES = ["0.2", "0.5", "0.8", "1.0"]
POLL_S = 0.2
MB = 1024 * 1024
PROBE_REPEATS = 3  # host_probe's runs, the least taken
# Each sweep's folder, kept until the script ends: on a file system without a journal
# (ext4 here) a new inode is found by skipping every one freed in the last minute or
# more, so removing one sweep's thousands of files made the next sweep's driver pay
# ~2 s of system CPU a 256-cell sweep (perf: ext4's recently_deleted)
KEPT: list[Path] = []


class ChargedSim(ProviderSim):
    """The simulator, also adding up what each admitted request was charged against TPM
    (prompt words + max_tokens, on admission), per key: the TPM limit's own count;
    and when it admitted each (``time.monotonic``), per key."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.charged: dict[str, int] = {}
        self.admitted: dict[str, list[float]] = {}
        self._charged_lock = threading.Lock()

    def admit(self, key: str, cost: int) -> Decision:
        decision = super().admit(key, cost)
        if decision.status != 429:
            with self._charged_lock:
                self.charged[key] = self.charged.get(key, 0) + cost
                self.admitted.setdefault(key, []).append(time.monotonic())
        return decision

    def steady_rpm(self, key: str, middle: float = 0.8) -> float:
        """Requests a minute over the ``middle`` share of ``key``'s admitted requests
        (the first and last tenths left out: start-up, the ramp, the last cells' tail)."""
        times = sorted(self.admitted.get(key, []))
        if len(times) < 20:
            return 0.0
        skip = round(len(times) * (1 - middle) / 2)
        first, last = times[skip], times[-1 - skip]
        return (len(times) - 1 - 2 * skip) / max(last - first, 1e-9) * 60


@dataclass
class Sweep:
    """One sweep's figures, read before its folder is removed."""

    label: str
    cells: int
    wall_s: float
    driver_peak: int  # bytes
    tree_peak: int  # bytes, driver + every descendant
    failed: int = 0
    longest_cell_s: float = 0.0
    ledger_tokens: int = 0
    first_start_s: float = 0.0  # command start to the first cell's start
    start_spread_s: float = 0.0  # first cell start to last cell start
    tail_s: float = 0.0  # last cell end to the command's exit
    statuses: dict[str, int] = field(default_factory=dict)
    cpu_s: float = 0.0  # the command's user + sys, its children included
    calls: int = 0  # model calls answered (the simulator's bill, or the replies kept)
    # user + sys of each process under the driver as last polled: a Ray cluster's processes
    # are not its children (they are nobody's to wait for), so children_cpu misses them
    polled_cpu_s: float = 0.0


def grid(cells: int) -> list[str]:
    """Overrides making ``cells`` cells: 4 temperatures x cells/4 replicates (1 cell: one of each)."""
    if cells == 1:
        return ["llm.temperature=0.7", "replicates=1"]
    return ["llm.temperature=" + ",".join(TEMPERATURES), f"replicates={cells // len(TEMPERATURES)}"]


def environment(key: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DRIFT_WORKERS"}  # the callback sets it
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env.pop(proxy, None)  # loopback only
    return {**env, "OPENAI_API_KEY": key, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1"}


def command(sim: ProviderSim | None, sweep_dir: Path, cells: int, rounds: int, extra: list[str]) -> list[str]:
    """The sweep's command: against ``sim``, or on the scripted model at zero latency (None)."""
    model = (
        ["model=scripted"]
        if sim is None
        else ["model=openai", "model.spec=openai:sim", f"model.kwargs.base_url={sim.base_url}"]
    )
    return [
        sys.executable,
        "-m",
        "harness.run",
        "-m",
        f"hydra.sweep.dir={sweep_dir}",
        f"runs_root={sweep_dir.parent}",
        *model,
        f"rounds={rounds}",
        "progress=false",
        *grid(cells),
        *extra,
    ]


def tree_rss(proc: psutil.Process, cpu: dict[int, float] | None = None) -> tuple[int, int]:
    """(driver RSS, driver + descendants RSS) in bytes; a process gone meanwhile counts 0.
    Each descendant's user + sys so far goes in ``cpu`` by pid."""
    try:
        driver = proc.memory_info().rss
        kids = proc.children(recursive=True)
    except psutil.Error:
        return 0, 0
    total = driver
    for kid in kids:
        with contextlib.suppress(psutil.Error):
            total += kid.memory_info().rss
            if cpu is not None:
                times = kid.cpu_times()
                cpu[kid.pid] = times.user + times.system
    return driver, total


def children_cpu() -> float:
    """user + sys of every child process waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def watch(
    cmd: list[str], env: dict[str, str], log: Path, timeout_s: float, cpu: dict[int, float] | None = None
) -> tuple[float, int, int, int]:
    """Run ``cmd``, polling its RSS (and its descendants' CPU into ``cpu``); kill its process group past ``timeout_s``.
    Returns (wall s, exit code, peak driver RSS, peak tree RSS); the command's CPU
    is the rise of ``children_cpu`` over the call (nothing else runs meanwhile)."""
    with log.open("w") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True
        )
        ps = psutil.Process(proc.pid)
        peak_driver = peak_tree = 0
        while not (ended := os.wait4(proc.pid, os.WNOHANG))[0]:
            if time.perf_counter() - started > timeout_s:
                os.killpg(proc.pid, signal.SIGKILL)
                ended = os.wait4(proc.pid, 0)
                break
            driver, tree = tree_rss(ps, cpu)
            peak_driver, peak_tree = max(peak_driver, driver), max(peak_tree, tree)
            time.sleep(POLL_S)
        wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(ended[1])
    # The kernel's high-water mark (KiB on Linux): the polls miss a peak shorter than
    # POLL_S, such as pyarrow's import as a sweep writes sweep.parquet (+~50 MB).
    peak_driver = max(peak_driver, ended[2].ru_maxrss * 1024)
    return wall, proc.returncode, peak_driver, peak_tree


def read_sweep(sweep: Sweep, sweep_dir: Path, began: float) -> None:
    """Fill ``sweep`` from the index, the manifests and the cell log."""
    index = read_index(sweep_dir)
    for cell in index.cells:
        sweep.statuses[cell.status] = sweep.statuses.get(cell.status, 0) + 1
    sweep.failed = sum(c.status != "completed" for c in index.cells)
    for path in sweep_dir.glob("*/manifest.json"):
        manifest = json.loads(path.read_text())
        counts = manifest.get("counts", {})
        sweep.ledger_tokens += counts.get("input_tokens", 0) + counts.get("output_tokens", 0)
        sweep.longest_cell_s = max(sweep.longest_cell_s, float(manifest.get("wall_s", 0.0)))
    log = sweep_dir / EVENTS_JSONL
    lines = log.read_text().splitlines() if log.is_file() else []
    events = [json.loads(line) for line in lines if line.strip()]
    starts = sorted(
        datetime.fromisoformat(e["started_at"]).timestamp() for e in events if e["status"] == "running"
    )
    ends = [datetime.fromisoformat(e["ended_at"]).timestamp() for e in events if e.get("ended_at")]
    if starts and ends:
        sweep.first_start_s = starts[0] - began
        sweep.start_spread_s = starts[-1] - starts[0]
        sweep.tail_s = began + sweep.wall_s - max(ends)


def run_sweep(
    sim: ProviderSim | None,
    label: str,
    cells: int,
    rounds: int,
    extra: list[str],
    timeout_s: float,
    under: Path | None = None,
) -> Sweep:
    """One sweep under the API key ``sk-<label>``, in a temp folder (in ``under``, or the
    system's temp folder) removed when the script ends."""
    tmp = Path(tempfile.mkdtemp(prefix=f"api-sweep-{label}-", dir=under))
    KEPT.append(tmp)  # removed once every sweep has run (remove_kept)
    sweep_dir = tmp / "sweep"
    cmd = command(sim, sweep_dir, cells, rounds, extra)
    began, cpu = time.time(), children_cpu()
    polled: dict[int, float] = {}
    wall, code, driver, tree = watch(cmd, environment(f"sk-{label}"), tmp / "stderr.txt", timeout_s, polled)
    sweep = Sweep(label, cells, wall, driver, tree, cpu_s=children_cpu() - cpu)
    sweep.polled_cpu_s = sum(polled.values())
    replies = sweep_dir.glob("*/*/replies.jsonl")  # one line a call answered
    sweep.calls = (
        sim.billing(f"sk-{label}").billed_requests
        if sim
        else sum(len(f.read_bytes().splitlines()) for f in replies)
    )
    if code != 0:
        tail = (tmp / "stderr.txt").read_text()[-1500:]
        print(f"  {label}: exit {code} after {wall:.0f} s (timeout {timeout_s:.0f} s)\n{tail}")
    if (sweep_dir / "sweep.json").is_file():
        read_sweep(sweep, sweep_dir, began)
    else:
        sweep.failed = cells
    return sweep


def ledger_line(sim: ProviderSim, sweep: Sweep) -> str:
    billed = sim.billing(f"sk-{sweep.label}").total_tokens
    verdict = "equal" if billed == sweep.ledger_tokens else "differ"
    return f"ledger {sweep.ledger_tokens} tokens, simulator billed {billed}: {verdict}"


def starts_line(sweep: Sweep) -> str:
    return (
        f"first cell started {sweep.first_start_s:.1f} s after the command, the last "
        f"{sweep.start_spread_s:.1f} s after the first; exit {sweep.tail_s:.1f} s after the last "
        f"cell ended; cells {sweep.statuses}"
    )


def timing_line(sweep: Sweep, one: Sweep) -> str:
    """The whole-process ratio first (this command's wall over the 1-cell command's,
    each process alone); then wall over the longest cell, which the load itself slows."""
    return (
        f"wall {sweep.wall_s:6.1f} s vs the 1-cell command's {one.wall_s:.1f} s -> whole-process "
        f"ratio {sweep.wall_s / max(one.wall_s, 1e-9):.2f} (goal <= 1.10 at 64 cells, 1.25 at 256)\n"
        f"      longest cell {sweep.longest_cell_s:5.1f} s (wall/longest "
        f"{sweep.wall_s / max(sweep.longest_cell_s, 1e-9):.2f}); driver CPU {cpu_line(sweep)}\n"
        f"      {starts_line(sweep)}"
    )


def ms_a_call(sweep: Sweep) -> float:
    """The sweep's CPU (user + sys) a model call, in ms."""
    return sweep.cpu_s / max(sweep.calls, 1) * 1000


def cpu_line(sweep: Sweep) -> str:
    return f"{sweep.cpu_s:.1f} s (user + sys) over {sweep.calls} calls = {ms_a_call(sweep):.1f} ms a call"


def in_process(n: int) -> list[str]:
    """Overrides for ``n`` cells in flight in one driver, each call free to go out."""
    return [f"sweep.concurrency={n}", f"model.concurrency={n}", f"model.max_concurrency={n}"]


def compiled() -> None:
    """This checkout's modules byte-compiled, as on any machine that ran them once:
    with ``PYTHONDONTWRITEBYTECODE`` set (CI's and sandboxes' shells) and no
    ``__pycache__`` (a fresh clone), every command below would otherwise compile
    the harness again, ~0.16 s of CPU at start and ~0.4 s in a 64 x 5 sweep."""
    for package in ("harness", "analysis"):
        compileall.compile_dir(REPO / package, quiet=1)


def driver_cpu(n: int, r: int, timeout_s: float, repeats: int) -> None:
    """Phase 0: the driver's CPU a model call, scripted model at zero latency: one
    cell and ``n`` cells, each command in its own process. Whole: the n-cell
    command's user + sys over its calls (start-up included); marginal: what the
    other n - 1 cells added, over the calls they added. Beside it, where the
    disk's share goes: the n-cell command under ``memory.fsync=round`` (a run's
    logs fsynced once a round, not each record), and with its folders in memory
    (tmpfs, ``/dev/shm``: fsyncs and new files cost the kernel next to nothing),
    what is left there being the driver's own.

    Each command runs ``repeats`` times, one of each in turn, and the least CPU of
    each is printed with the range: a slower host, or a busier one, only adds CPU
    to the same work (the same tmpfs command took 3.6-5.7 s within an hour here),
    so the least is the figure the host disturbed least, and the range how much."""
    compiled()
    shm = Path("/dev/shm")
    commands: dict[str, tuple[int, list[str], Path | None]] = {
        "one": (1, ["sweep.concurrency=1"], None),
        "many": (n, [f"sweep.concurrency={n}"], None),
        "round": (n, [f"sweep.concurrency={n}", "memory.fsync=round"], None),
    }
    if shm.is_dir() and os.access(shm, os.W_OK):
        commands["tmpfs"] = (n, [f"sweep.concurrency={n}"], shm)
    runs: dict[str, list[Sweep]] = {label: [] for label in commands}
    before = host_probe()
    for turn in range(repeats):
        for label, (cells, extra, under) in commands.items():
            runs[label].append(
                run_sweep(None, f"cpu-{label}-{turn}", cells, r, extra, timeout_s, under=under)
            )
    least = {label: min(sweeps, key=lambda s: s.cpu_s) for label, sweeps in runs.items()}
    one, many = least["one"], least["many"]
    failed = sum(s.failed for sweeps in runs.values() for s in sweeps)
    marginal = (many.cpu_s - one.cpu_s) / max(many.calls - one.calls, 1) * 1000
    how = f"the least of {repeats} runs of each command, taken in turn" if repeats > 1 else "one run of each"
    print(
        f"0. driver CPU a call (scripted, zero latency; {how}): 1 cell {cpu_line(one)}; "
        f"{n} cells {cpu_line(many)} (whole, goal <= 2{spread(runs['many'])}); "
        f"marginal {marginal:.1f} ms a call; failed cells {failed}",
        flush=True,
    )
    print(f"   memory.fsync=round: {cpu_line(least['round'])}{spread(runs['round'])}", flush=True)
    if "tmpfs" not in least:
        print("   tmpfs: skipped, no writable /dev/shm", flush=True)
    else:
        memory = least["tmpfs"]
        print(
            f"   on tmpfs: {cpu_line(memory)}{spread(runs['tmpfs'])}; the disk's share under "
            f"the default: {(many.cpu_s - memory.cpu_s) / max(many.calls, 1) * 1000:.1f} ms a call",
            flush=True,
        )
    print(
        f"   host: a fixed Python loop took {before:.2f} s of CPU before these commands and "
        f"{host_probe():.2f} s after (least of {PROBE_REPEATS} each); compare sittings beside it",
        flush=True,
    )


def host_probe() -> float:
    """The least CPU, in seconds, of ``PROBE_REPEATS`` runs of one fixed pure-Python
    loop (~0.2 s here): how fast the host runs Python at the moment, whatever the load says."""
    least = float("inf")
    for _ in range(PROBE_REPEATS):
        began = time.thread_time()  # this thread's alone: nothing else of this process counts
        table: dict[str, int] = {}
        for i in range(1_200_000):  # the driver's kind of work: small dicts, strings, calls
            key = f"k{i % 997}"
            table[key] = table.get(key, 0) + len(key)
        least = min(least, time.thread_time() - began)
    return least


def spread(sweeps: list[Sweep]) -> str:
    """The range of ``sweeps``' CPU a call, as "; runs 1.9-2.6 ms a call"; "" for one sweep."""
    if len(sweeps) < 2:
        return ""
    per_call = sorted(ms_a_call(s) for s in sweeps)
    return f"; runs {per_call[0]:.1f}-{per_call[-1]:.1f} ms a call"


def sleeping(args: argparse.Namespace, n: int, r: int, timeout_s: float) -> None:
    """Phase 0b, the issue's own shape: the scripted model sleeping ``--latency``
    a call, no HTTP (as inspect_ai's sleeping ``ModelAPI`` beside it in phase 1):
    the n-cell (and each ``--big``) command's wall over the 1-cell command's."""
    sleep = [f"model.latency_s={args.latency}"]
    one = run_sweep(None, "sleep-one", 1, r, ["sweep.concurrency=1", *sleep], timeout_s)
    print(f"0b. scripted model sleeping {args.latency:g} s a call (no HTTP), {r} rounds:", flush=True)
    for cells in [n, *[b for b in args.big if b > n]]:
        many = run_sweep(None, f"sleep-{cells}", cells, r, [f"sweep.concurrency={cells}", *sleep], timeout_s)
        print(f"  {cells} cells: {timing_line(many, one)}; failed cells {many.failed}", flush=True)
    for cells in [b for b in args.big if b > n]:  # past what one interpreter's CPU keeps up with
        processes = [f"sweep.concurrency={cells}", f"sweep.processes={os.cpu_count() or 1}", *sleep]
        many = run_sweep(None, f"sleep-{cells}-p", cells, r, processes, timeout_s)
        print(
            f"  {cells} cells, sweep.processes={os.cpu_count() or 1}: {timing_line(many, one)}; "
            f"failed cells {many.failed}",
            flush=True,
        )


def unlimited(args: argparse.Namespace, n: int, r: int, timeout_s: float) -> tuple[Sweep, dict[str, float]]:
    """Phase 1 (and the memory figures): returns the in-process sweep and its demand rates."""
    inproc = in_process(n)
    with ChargedSim(rpm=10**9, tpm=10**12, latency_s=args.latency) as sim:
        one = run_sweep(sim, "one", 1, r, ["sweep.concurrency=1"], timeout_s)
        print(
            f"1-cell in-process sweep: wall {one.wall_s:.1f} s, its cell {one.longest_cell_s:.1f} s, "
            f"driver peak RSS {one.driver_peak / MB:.0f} MB (the base); {ledger_line(sim, one)}",
            flush=True,
        )
        print(f"1. unlimited, {n} cells x {r} rounds")
        swept = run_sweep(sim, "inprocess", n, r, inproc, timeout_s)
        print(f"  in-process (sweep.concurrency={n}): {timing_line(swept, one)}")
        print(f"      {ledger_line(sim, swept)}", flush=True)
        for big in [b for b in args.big if b > n]:
            large = run_sweep(sim, f"inprocess{big}", big, r, in_process(big), timeout_s)
            print(f"  in-process, {big} cells: {timing_line(large, one)}")
            print(f"      {ledger_line(sim, large)}; failed cells {large.failed}", flush=True)
        inspect_side(args, n, one.calls, timeout_s)
        key = "sk-inprocess"
        demand = {
            "calls": sim.billing(key).billed_requests,
            "charged": sim.charged.get(key, 0),
            "over_s": max(swept.longest_cell_s, 1e-9),
        }
        joblib = None
        if not args.skip_process:
            launcher = ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={n}"]
            joblib = run_sweep(sim, "joblib", n, r, launcher, timeout_s)
            print(f"  process (joblib n_jobs={n}):    {timing_line(joblib, one)}")
            print(f"      {ledger_line(sim, joblib)}", flush=True)
    memory(one, swept, joblib, n)
    return swept, demand


def inspect_side(args: argparse.Namespace, n: int, calls: int, timeout_s: float) -> None:
    """inspect_ai beside: ``n`` samples of ``calls`` calls on a sleeping ModelAPI
    (benchmarks/inspect_side.py), one sample and n samples each in its own process."""
    env = dict(os.environ)
    if args.inspect_path:  # inspect_ai installed apart from the harness's environment
        env["PYTHONPATH"] = os.pathsep.join([args.inspect_path, env.get("PYTHONPATH", "")])
    walls, peaks = [], []
    with tempfile.TemporaryDirectory(prefix="api-sweep-inspect-") as tmp:
        for samples in (1, n):
            cmd = [sys.executable, str(REPO / "benchmarks" / "inspect_side.py"), f"--samples={samples}"]
            cmd += [f"--calls={calls}", f"--latency={args.latency}"]
            wall, code, peak, _ = watch(cmd, env, Path(tmp) / "stderr.txt", timeout_s)
            if code == 3:
                print("   inspect_ai: not installed, skipped (pip install -e '.[compare]')")
                return
            if code != 0:
                print(f"   inspect_ai: exit {code}: {(Path(tmp) / 'stderr.txt').read_text()[-600:]}")
                return
            walls.append(wall)
            peaks.append(peak)
    print(
        f"   inspect_ai beside ({n} samples x {calls} calls, max_connections={n}): one sample {walls[0]:.1f} s,"
        f" {n} samples {walls[1]:.1f} s -> whole-process ratio {walls[1] / walls[0]:.2f}; peak RSS "
        f"{peaks[0] / MB:.0f} -> {peaks[1] / MB:.0f} MB, {(peaks[1] - peaks[0]) / MB / n:.2f} MB a sample",
        flush=True,
    )


def memory(one: Sweep, swept: Sweep, joblib: Sweep | None, n: int) -> None:
    above = (swept.driver_peak - one.driver_peak) / MB
    print(
        f"3. memory: in-process driver peak {swept.driver_peak / MB:.0f} MB, "
        f"{above:.0f} MB above the 1-cell base -> {above / n:.2f} MB a cell (goal <= 1)"
    )
    if joblib is not None:
        print(
            f"   process launcher: driver + workers peak {joblib.tree_peak / MB:.0f} MB "
            f"-> {joblib.tree_peak / MB / n:.0f} MB a cell (summed RSS; ~110 MB expected)",
            flush=True,
        )


def limited(args: argparse.Namespace, n: int, r: int, demand: dict[str, float], timeout_s: float) -> None:
    """Phase 2: RPM and TPM at ``1/args.share`` of the unlimited demand, over ``args.window`` s."""
    rate_calls = demand["calls"] / demand["over_s"] / args.share  # per second
    rate_tokens = demand["charged"] / demand["over_s"] / args.share
    w = args.window
    rpm_w, tpm_w = max(1, round(rate_calls * w)), max(1, round(rate_tokens * w))
    rate_calls, rate_tokens = rpm_w / w, tpm_w / w  # what the simulator enforces, after rounding
    harness = [f"model.rpm={round(rate_calls * 60)}", f"model.tpm={round(rate_tokens * 60)}"]
    inproc = in_process(n)
    print(
        f"2. at the limit: simulator {rpm_w} requests and {tpm_w} tokens per {w:g} s sliding window "
        f"(1/{args.share:g} of the unlimited demand), {' '.join(harness)}"
    )
    with ChargedSim(rpm=rpm_w, tpm=tpm_w, window_s=w, latency_s=args.latency) as sim:
        swept = run_sweep(sim, "limited", n, r, [*inproc, *harness], timeout_s)
        bill, charged = sim.billing("sk-limited"), sim.charged.get("sk-limited", 0)
        calls_s, tokens_s = bill.billed_requests / rate_calls, charged / rate_tokens
        floor = max(calls_s, tokens_s)
        window_floor = max((bill.billed_requests - rpm_w) / rate_calls, (charged - tpm_w) / rate_tokens)
        print(
            f"  {bill.billed_requests} calls / {rate_calls:.1f} per s = {calls_s:.1f} s; "
            f"{charged} tokens charged / {rate_tokens:.0f} per s = {tokens_s:.1f} s "
            f"(less the first window's burst: {max(window_floor, 0):.1f} s)"
        )
        print(
            f"  wall {swept.wall_s:.1f} s -> wall/limit's minimum {swept.wall_s / max(floor, 1e-9):.2f} "
            f"(goal <= 1.15); failed cells {swept.failed} of {n} (goal 0); 429s {bill.rate_limited}"
        )
        print(f"      {starts_line(swept)}")
        print(f"      {ledger_line(sim, swept)}", flush=True)


def sustained(args: argparse.Namespace, r: int, timeout_s: float, processes: int, ray: bool = False) -> None:
    """Phase 4: ``args.rpm_cells`` cells against a simulator limited to ``args.rpm``
    requests a minute (over a ``args.window`` s sliding window, the limit scaled to
    it), with ``model.rpm`` at the same figure: wall over the limit's own minimum.
    With ``processes`` > 1 the cells split over that many driver processes
    (``sweep.processes``), each holding the limit ÷ processes; one key, one bill.
    With ``ray`` they are that many Ray workers on a local cluster (``sweep.engine=ray``),
    whose start-up is in the wall; the RPM between the first cell's start and the
    last one's end is printed beside it, and the CPU of the driver and of the
    cluster's processes (polled) apart."""
    n, w = args.rpm_cells, args.window
    per_window = max(1, round(args.rpm * w / 60))
    label = f"rpm-ray{processes}" if ray else "rpm" if processes == 1 else f"rpm-p{processes}"
    extra = [*in_process(n), f"model.rpm={args.rpm}", f"sweep.processes={processes}"]
    extra += ["sweep.engine=ray"] if ray else []
    who = f"{processes} Ray worker(s)" if ray else f"{processes} driver process(es)"
    cpu_who = "the driver alone (not the Ray workers)" if ray else "every process"
    with ChargedSim(rpm=per_window, tpm=10**12, window_s=w, latency_s=args.latency) as sim:
        swept = run_sweep(sim, label, n, r, extra, timeout_s)
        bill = sim.billing(f"sk-{label}")
        floor = bill.billed_requests / (args.rpm / 60)
        cells_s = max(swept.wall_s - swept.first_start_s - swept.tail_s, 1e-9)
        print(
            f"4. {args.rpm} RPM sustained, {who}: {n} cells x {r} rounds, simulator "
            f"{per_window} requests per {w:g} s; {bill.billed_requests} calls in {swept.wall_s:.1f} s = "
            f"{bill.billed_requests / swept.wall_s * 60:.0f} RPM ({bill.billed_requests / cells_s * 60:.0f} "
            f"from the first cell's start to the last one's end); wall/limit's minimum ({floor:.1f} s) "
            f"{swept.wall_s / max(floor, 1e-9):.2f}; 429s {bill.rate_limited}; failed cells {swept.failed} "
            f"of {n} (goal 0); CPU of {cpu_who} {cpu_line(swept)}"
        )
        print(
            f"      sustained: {sim.steady_rpm(f'sk-{label}'):.0f} RPM over the middle 80% of the calls "
            f"(the simulator's admissions; its window admits {per_window / w * 60:.0f} a minute)"
        )
        if ray:
            per_call = swept.polled_cpu_s / max(swept.calls, 1) * 1000
            print(
                f"      the Ray cluster's processes (workers, raylet, GCS, agents), as last polled "
                f"every {POLL_S:g} s: {swept.polled_cpu_s:.1f} s (user + sys) = {per_call:.1f} ms a call"
            )
        print(f"      {starts_line(swept)}")
        print(f"      {ledger_line(sim, swept)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="12 cells x 2 rounds")
    parser.add_argument("--cells", type=int, default=64, help="cells per sweep, a multiple of 4 (64)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per cell (5)")
    parser.add_argument("--latency", type=float, default=0.5, help="simulator seconds per call (0.5)")
    parser.add_argument("--window", type=float, default=2.0, help="limited: sliding window, s (2)")
    parser.add_argument("--share", type=float, default=3.0, help="limited: demand / limit (3)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per sweep (900)")
    parser.add_argument("--skip-process", action="store_true", help="no joblib sweep")
    parser.add_argument("--big", type=int, nargs="*", default=[256], help="also these many cells (256)")
    parser.add_argument(
        "--cpu-repeats",
        type=int,
        default=None,
        help="phase 0: runs of each command, the least printed (3; --quick 1)",
    )
    parser.add_argument("--rpm", type=int, default=10_000, help="phase 4's limit, requests a minute")
    parser.add_argument("--rpm-cells", type=int, default=256, help="phase 4's cells (256; 0: skip)")
    parser.add_argument(
        "--processes",
        type=int,
        nargs="*",
        default=[1, 2],
        help="phase 4's driver processes, each a run (1 2)",
    )
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--only-rpm", action="store_true", help="phase 4 alone")
    only.add_argument("--only-cpu", action="store_true", help="phase 0 alone (driver CPU a call)")
    parser.add_argument("--ray", action="store_true", help="phase 4's runs past 1 on Ray (sweep.engine=ray)")
    parser.add_argument("--inspect-path", default=None, help="a folder holding inspect_ai, if apart")
    args = parser.parse_args()
    n, r = (12, 2) if args.quick else (max(4, args.cells // 4 * 4), args.rounds)
    if args.quick:
        args.big, args.rpm_cells = [], 0
    if args.cpu_repeats is not None and args.cpu_repeats < 1:
        parser.error(f"--cpu-repeats: at least 1, got {args.cpu_repeats}")
    args.cpu_repeats = args.cpu_repeats or (1 if args.quick else 3)
    if args.only_cpu:
        args.rpm_cells = 0
    timeout_s = min(args.timeout, 150.0) if args.quick else args.timeout
    print(f"{n} cells x {r} rounds, latency {args.latency:g} s, {os.cpu_count()} cores, {load()}", flush=True)
    began = time.perf_counter()
    compiled()
    if not args.only_rpm:
        driver_cpu(n, r, timeout_s, args.cpu_repeats)
        print(f"   ({load()})")
    if not (args.only_rpm or args.only_cpu):
        sleeping(args, n, r, timeout_s)
        print(f"   ({load()})")
        swept, demand = unlimited(args, n, r, timeout_s)
        print(f"   ({load()})")
        if swept.failed == 0:
            limited(args, n, r, demand, timeout_s)
        else:
            print("2. at the limit: skipped, the unlimited in-process sweep had failed cells")
    for processes in args.processes if args.rpm_cells else []:
        print(f"   ({load()})")
        sustained(args, r, timeout_s, processes, ray=args.ray and processes > 1)
    print(f"total {time.perf_counter() - began:.0f} s, {load()}")


def remove_kept() -> None:
    for tmp in KEPT:
        shutil.rmtree(tmp, ignore_errors=True)


def load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    try:
        main()
    finally:
        remove_kept()
