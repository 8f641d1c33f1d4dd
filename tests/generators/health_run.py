# ruff: noqa: E501  (log lines are written out whole)
"""A Megatron training log with injected slowdowns and training-health faults, and its truth.

One file, one or two attempts (a GPU dies, the job restarts from the last checkpoint on a node
list where the dead node was replaced). Iteration lines follow Megatron's `training_log` format
(shared/FORMATS.md §5.1): even seeds the Megatron-DeepSpeed (BLOOM) layout with seconds and no
stamp, odd seeds the 2024 Megatron-LM layout with a `[datetime]` stamp and milliseconds. What is
injected, all drawn from the seed unless given:

- a slowdown of `slowdown` (0.03, 0.05, 0.10) from a random iteration of one attempt, to its end
  or for a while (`mode="within"`), or the whole second attempt after the restart brought in a
  new node (`mode="restart"`);
- loss spikes (the loss jumps 1.3-3x and decays back, the gradient norm jumps with it);
- a few NaN iterations (Megatron drops the `lm loss` field and counts `number of nan iterations`);
- fp16 runs: the loss scale calibrating down from 2^32 at the start (skipped steps that are no
  fault), a routine overflow after each growth window, and a burst of skipped steps (optionally
  collapsing the scale to 1).

Step times carry uniform noise of +-1.5% and an occasional hiccup (+30%, one line): a healthy run
must yield no finding.

    python -m tests.generators.health_run /tmp/health --seed 3
"""

from __future__ import annotations

import argparse
import math
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

T0 = datetime(2024, 5, 6, 9, 0, 0)
TRAIN_ITERS = 200_000
SAVE_INTERVAL = 200
HOSTS = [f"gpu-node{n:03d}" for n in range(1, 17)]
SPARE = "gpu-node042"
GPUS = len(HOSTS) * 8
CKPT = "/checkpoints/gpt-13b"
USUAL_SCALE = 2.0**16  # where the fp16 scaler settles after calibrating down from 2^32


@dataclass(frozen=True)
class SlowdownTruth:
    attempt: int  # 0-based
    first_iteration: int
    last_iteration: int
    fraction: float
    lost_s: float
    hosts_joined: tuple[str, ...] = ()


@dataclass(frozen=True)
class Truth:
    gpus: int
    log_interval: int
    fp16: bool
    slowdowns: list[SlowdownTruth] = field(default_factory=list)
    spikes: list[int] = field(default_factory=list)  # iterations where the loss jumped
    nans: list[tuple[int, int]] = field(default_factory=list)  # first and last NaN iteration
    skip_bursts: list[tuple[int, int, int]] = field(default_factory=list)  # first, last, count
    collapse: int | None = None  # iteration the loss scale fell 2^10 below the highest it held
    attempts: int = 1


@dataclass
class Plan:
    seed: int = 0
    slowdown: float | None = None
    mode: str = "within"  # "within" | "restart"
    transient: bool = False
    spikes: int = 0
    nan: bool = False
    fp16: bool = False
    skip_burst: bool = False
    collapse: bool = False
    log_interval: int = 1
    iterations: int = 1500


def generate(out_dir: Path, plan: Plan) -> Truth:
    rng = random.Random(plan.seed)
    stamped = plan.seed % 2 == 1
    out_dir.mkdir(parents=True, exist_ok=True)
    base = rng.uniform(2.0, 120.0)
    restart = plan.slowdown is not None and plan.mode == "restart"
    split = rng.randrange(plan.iterations // 3, 2 * plan.iterations // 3) if restart else None
    # the slowed stretch, in iterations
    slow: tuple[int, int] | None = None
    slow_attempt = 0
    if plan.slowdown is not None:
        if restart:
            assert split is not None
            resume = split - split % SAVE_INTERVAL
            slow = (resume + 1, plan.iterations)
            slow_attempt = 1
        else:
            lo = rng.randrange(150, plan.iterations - 300)
            hi = (
                min(plan.iterations, lo + rng.randrange(200, 600))
                if plan.transient
                else plan.iterations
            )
            slow = (lo, hi)
    # a spike starts on a logged iteration: with a log interval above 1 it would otherwise have
    # decayed before the next line shows it (Megatron averages the loss over the interval)
    every = plan.log_interval
    drawn = rng.sample(range(200, plan.iterations - 100, 97), plan.spikes) if plan.spikes else []
    spikes = sorted(-(-k // every) * every for k in drawn)
    spike_shape = {k: (rng.uniform(1.3, 3.0), rng.uniform(3, 25)) for k in spikes}

    def away_from_spikes() -> int:
        """An iteration at least 60 from every spike: faults found one at a time."""
        while True:
            at = rng.randrange(300, plan.iterations - 100)
            if all(abs(at - k) > 60 for k in spikes):
                return at

    nan_first = away_from_spikes() if plan.nan else None
    nan_len = rng.randrange(1, 4) * plan.log_interval
    burst_first = away_from_spikes() if plan.skip_burst else None
    burst_count = rng.randrange(6, 12)

    lines: list[str] = []
    t = 0.0
    truth = Truth(gpus=GPUS, log_interval=plan.log_interval, fp16=plan.fp16)
    slow_lost = 0.0
    slow_its: list[int] = []
    scale = 2.0**32
    held = USUAL_SCALE
    scale_grown_at = 0
    burst_left = 0
    burst_its: list[int] = []
    collapse_at: int | None = None
    nodes = list(HOSTS)

    def stamp(at: float) -> str:
        return (T0 + timedelta(seconds=at)).strftime("%Y-%m-%d %H:%M:%S")

    def start_attempt(resume: int | None) -> None:
        nonlocal t
        lines.append(f"SLURM_JOB_NODELIST={','.join(nodes)}")
        lines.append(
            "using world size: 128, data-parallel-size: 8, tensor-model-parallel size: 4, pipeline-model-parallel size: 4 "
        )
        if resume is not None:
            lines.append(f" loading checkpoint from {CKPT} at iteration {resume}")
            lines.append(f"  successfully loaded checkpoint from {CKPT} at iteration {resume}")
        t += rng.uniform(300, 600)
        lines.append(f"[before the start of training step] datetime: {stamp(t)} ")

    start_attempt(None)
    attempt = 0
    it = 1
    pending = 0.0  # seconds since the last printed line
    skipped_since = 0
    nan_since = 0
    while it <= plan.iterations:
        step = base * rng.uniform(0.985, 1.015)
        if rng.random() < 0.005:
            step *= 1.3  # a hiccup: one slow step, no slowdown
        if slow is not None and slow[0] <= it <= slow[1] and attempt == slow_attempt:
            extra = step * plan.slowdown  # type: ignore[operator]
            slow_lost += extra
            step += extra
            slow_its.append(it)
        t += step
        pending += step
        skipped = False
        if plan.fp16:
            if it <= 40 and scale > USUAL_SCALE:
                scale /= 2
                skipped = True
            elif (
                burst_first is not None
                and burst_first <= it
                and (burst_left > 0 or it == burst_first)
            ):
                if it == burst_first:
                    burst_left = burst_count
                if rng.random() < 0.6 or burst_left == burst_count:
                    scale = max(1.0, scale / 2) if not plan.collapse else max(1.0, scale / 2**4)
                    skipped = True
                    burst_left -= 1
                    burst_its.append(it)
                    if scale <= held / 2**10 and collapse_at is None:
                        collapse_at = it
            elif it - scale_grown_at >= 1000:
                scale *= 2
                scale_grown_at = it
            elif it - scale_grown_at == 1 and it > 1000:
                scale /= 2  # the routine overflow right after a growth
                skipped = True
        if it > 40:
            held = max(held, scale)  # the highest scale since the scaler settled
        if skipped:
            skipped_since += 1
        is_nan = nan_first is not None and nan_first <= it < nan_first + nan_len
        if is_nan:
            nan_since += 1
        if it % plan.log_interval == 0:
            loss = 2.3 + 8.0 * math.exp(-it / 300)
            loss *= rng.uniform(0.99, 1.01)
            grad = rng.uniform(0.8, 1.2) * (0.2 + 3 * math.exp(-it / 100))
            for k in spikes:
                if it >= k:
                    f, tau = spike_shape[k]
                    loss *= 1 + (f - 1) * math.exp(-(it - k) / tau)
                    if it - k < plan.log_interval:
                        grad *= rng.uniform(50, 500)
            lines.append(
                _iteration(
                    it,
                    pending,
                    plan,
                    loss,
                    grad,
                    scale,
                    skipped_since,
                    nan_since,
                    stamped,
                    stamp(t),
                )
            )
            pending = 0.0
            skipped_since = nan_since = 0
            if rng.random() < 0.2:
                lines.append(
                    f"[Rank {rng.randrange(GPUS)}] (after {it} iterations) memory (MB) | allocated: 20150.3 | max allocated: 48110.9"
                )
        if it % SAVE_INTERVAL == 0:
            lines.append(f"saving checkpoint at iteration {it:7d} to {CKPT}")
            t += rng.uniform(20, 40)
            lines.append(f"  successfully saved checkpoint at iteration {it:7d} to {CKPT}")
        if split is not None and it == split and attempt == 0:
            lines.append(
                "[default3]:terminate called after throwing an instance of 'c10::CUDAError'"
            )
            lines.append("[default3]:  what():  CUDA error: unknown error")
            dead = rng.randrange(len(nodes))
            nodes[dead] = SPARE
            t += rng.uniform(600, 1800)
            attempt = 1
            it = split - split % SAVE_INTERVAL
            start_attempt(it)
            pending = 0.0
        it += 1
    (out_dir / "train.log").write_text("".join(line + "\n" for line in lines))

    if slow is not None:
        logged = [i for i in slow_its if i % plan.log_interval == 0]
        truth.slowdowns.append(
            SlowdownTruth(
                attempt=slow_attempt,
                first_iteration=slow_its[0],
                last_iteration=logged[-1],
                fraction=plan.slowdown or 0.0,
                lost_s=slow_lost,
                hosts_joined=(SPARE,) if restart else (),
            )
        )
    truth.spikes.extend(spikes)
    if nan_first is not None:
        truth.nans.append((nan_first, nan_first + nan_len - 1))
    if burst_its:
        truth.skip_bursts.append((burst_its[0], burst_its[-1], len(burst_its)))
    return Truth(
        gpus=truth.gpus,
        log_interval=truth.log_interval,
        fp16=truth.fp16,
        slowdowns=truth.slowdowns,
        spikes=truth.spikes,
        nans=truth.nans,
        skip_bursts=truth.skip_bursts,
        collapse=collapse_at,
        attempts=2 if split is not None else 1,
    )


def _iteration(
    it: int,
    seconds: float,
    plan: Plan,
    loss: float,
    grad: float,
    scale: float,
    skipped: int,
    nans: int,
    stamped: bool,
    when: str,
) -> str:
    """A Megatron training_log line; `seconds` the time since the last one."""
    per_it = seconds / plan.log_interval
    head = (
        f" [{when}] iteration {it:8d}/{TRAIN_ITERS:8d} |"
        if stamped
        else f"[default7]: iteration {it:8d}/{TRAIN_ITERS:8d} |"
    )
    elapsed = (
        f" elapsed time per iteration (ms): {per_it * 1000:.1f} |"
        if stamped
        else f" elapsed time per iteration (s): {per_it:.2f} |"
    )
    loss_part = "" if nans else f" lm loss: {loss:.6E} |"
    scale_part = (
        f" loss scale: {scale:.1f} |" if plan.fp16 else (" loss scale: 1.0 |" if stamped else "")
    )
    return (
        f"{head} consumed samples: {it * 512:12d} |{elapsed} learning rate: 1.500E-04 | "
        f"global batch size:   512 |{loss_part}{scale_part} grad norm: {grad:.3f} | num zeros: 0.0 | "
        f"number of skipped iterations: {skipped:3d} | number of nan iterations: {nans:3d} |"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out_dir", type=Path)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--slowdown", type=float)
    p.add_argument("--mode", default="within")
    p.add_argument("--spikes", type=int, default=0)
    p.add_argument("--nan", action="store_true")
    p.add_argument("--fp16", action="store_true")
    p.add_argument("--skip-burst", action="store_true")
    p.add_argument("--collapse", action="store_true")
    p.add_argument("--log-interval", type=int, default=1)
    a = p.parse_args()
    plan = Plan(
        a.seed,
        a.slowdown,
        a.mode,
        False,
        a.spikes,
        a.nan,
        a.fp16,
        a.skip_burst,
        a.collapse,
        a.log_interval,
    )
    print(generate(a.out_dir, plan))


if __name__ == "__main__":
    main()
