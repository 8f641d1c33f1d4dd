# ruff: noqa: E501  (log lines are kept whole)
"""Ray's driver re-raises a remote task's error as `RayTaskError(<type>): ray::<task>() (pid=,
ip=)` (ray/exceptions.py RayTaskError.__str__), the remote traceback after it, ending with the
error's own report: that report is the root where the log holds it, the wrapper only where it
does not (patterns/ray.toml, analysis/launcher_reports.past_wrappers)."""

from __future__ import annotations

from .helpers import Run, failed_verdict, told

STEPS = [f"(TaskRunner pid=5120) step:{n} - actor/pg_loss:0.0{n}" for n in range(1, 4)]
DRIVER = [
    "Traceback (most recent call last):",
    '  File "/opt/verl/trainer/main_ppo.py", line 64, in run_ppo',
    "    ray.get(runner.run.remote(config))",
    '  File "/usr/lib/python3/site-packages/ray/_private/worker.py", line 2771, in get',
    "    values, debugger_breakpoint = worker.get_objects(object_refs, timeout=timeout)",
    "    raise value.as_instanceof_cause()",
]
WRAPPER = "ray.exceptions.RayTaskError({inner}): ray::TaskRunner.run() (pid=5120, ip=10.2.0.8, actor_id=8e2a1f0b7c3d4e5f6a7b8c9d02000000, repr=<main_ppo.TaskRunner object at 0x7f20aa>)"
REMOTE = [
    '  File "/opt/verl/trainer/main_ppo.py", line 190, in run',
    "    trainer.fit()",
    '  File "/opt/verl/single_controller/ray/base.py", line 49, in func',
    "    output = ray.get(output)",
]


def test_the_remote_error_at_the_end_of_the_wrapped_traceback_is_the_root(run: Run) -> None:
    inner = "ValueError: Default process group has not been initialized, please make sure to call init_process_group."
    lines = [*STEPS, *DRIVER, WRAPPER.format(inner="RuntimeError"), *REMOTE, inner]
    assert told(run, lines, len(lines) - 1)[0] == "python_exception"


def test_an_actor_death_at_the_end_of_the_wrapped_traceback_is_the_root(run: Run) -> None:
    died = "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."
    lines = [*STEPS, *DRIVER, WRAPPER.format(inner="ActorDiedError"), *REMOTE, died]
    assert told(run, lines, len(lines) - 1)[0] == "process_killed"


def test_a_wrapper_whose_remote_traceback_is_cut_is_the_root(run: Run) -> None:
    lines = [*STEPS, *DRIVER, WRAPPER.format(inner="ActorDiedError"), REMOTE[0]]
    assert told(run, lines, len(STEPS) + len(DRIVER))[0] == "process_killed"


def test_a_cut_wrapper_of_torchs_out_of_memory_error_is_a_gpu_oom(run: Run) -> None:
    # the wrapped type alone says it: torch's allocator raises torch.OutOfMemoryError; Ray's own
    # OutOfMemoryError (its memory monitor's kill) is raised bare, and is host memory
    lines = [*STEPS, *DRIVER, WRAPPER.format(inner="OutOfMemoryError"), *REMOTE[:2]]
    assert told(run, lines, len(lines) - 3)[0] == "oom_gpu"
    monitor = (
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory."
    )
    lines = [*STEPS, *DRIVER, monitor]
    assert told(run, lines, len(lines) - 1)[0] == "oom_host"


def test_the_verl_worker_an_actor_death_names_is_the_culprit_of_a_report_only_root(
    run: Run,
) -> None:
    # ActorDiedError's report lists the dead actor (ray/exceptions.py `\tname: {name}`); verl
    # names its workers `<6 chars><Class>_<placement group>:<bundle>` (single_controller/ray)
    died = "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."
    report = [
        "\tclass_name: create_colocated_worker_cls.<locals>.WorkerDict",
        "\tname: Qm7cXzWorkerDict_0:3",
    ]
    lines = [*STEPS, *DRIVER, WRAPPER.format(inner="ActorDiedError"), *REMOTE, died, *report]
    assert told(run, lines, len(STEPS) + len(DRIVER) + 1 + len(REMOTE)) == ("process_killed", 3)


def test_the_old_memory_monitor_is_the_hosts_memory_and_names_the_node(run: Run) -> None:
    # memory_monitor.py get_message (Ray 1.x), as the driver prints a task's error
    oom = "(pid=737) ray._private.memory_monitor.RayOutOfMemoryError: More than 95% of the memory on node gpu-node-03 is used (7.12 / 7.49 GB). The top 10 memory consumers are:"
    lines = [
        *STEPS,
        "2021-04-12 10:00:01,000\tERROR worker.py:1053 -- Possible unhandled error from worker: ray::LocalReplayBuffer.add_batch()",
        oom,
        "PID\tMEM\tCOMMAND",
    ]
    _doc, inc, _path = failed_verdict(run, lines)
    assert inc["category"] == "oom_host", inc
    assert inc["root_cause"]["line"] == len(STEPS) + 2, inc["root_cause"]
    assert inc["root_cause"]["host"] == "gpu-node-03" or inc["culprit"]["host"] == "gpu-node-03", (
        inc
    )


def test_a_lost_gcs_ends_the_process_that_needed_it(run: Run) -> None:
    # Ray 1.x's FATAL record (glog) and Ray 2.x's error before it exits
    for lost in (
        "F0629 15:22:02.621095 14109 14633 service_based_gcs_client.cc:207] Couldn't reconnect to GCS server. The last attempted GCS server address was 10.0.0.5:6379",
        "[2025-12-19 15:55:39,521 E 3044 30260] rpc_client.h:203: Failed to connect to GCS within 60 seconds. GCS may have been killed. It's either GCS is terminated by `ray stop` or is killed unexpectedly. The program will terminate.",
    ):
        lines = [*STEPS, lost, "*** Check failure stack trace: ***"]
        assert told(run, lines, len(STEPS))[0] == "comm_error"
