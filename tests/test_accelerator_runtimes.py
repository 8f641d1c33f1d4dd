# ruff: noqa: E501  (log lines are kept whole)
"""Whole-log behaviour of the signatures read from accelerator stacks other than CUDA/NCCL
(patterns/ascend.toml: torch_npu, its ACL result codes and HCCL; patterns/xla.toml: torch_xla's
XRT mesh service; patterns/openxla.toml: XLA's and TensorFlow's statuses; patterns/neuron.toml:
the AWS Neuron runtime and its collectives; patterns/habana.toml: Gaudi's Synapse status).
Lines are constructed from the emitters' format strings (see each pattern file's header)."""

from __future__ import annotations

from .helpers import Run, assert_root, failed_verdict, told, verdict_incident

STEP = "2025-03-02 08:13:{s:02d} | INFO | step {n} | loss 2.{n:02d}"


def test_torch_npus_error_trailer_names_the_rank_whose_hccl_call_failed(run: Run) -> None:
    # HCCLUtils.hpp's C10D_HCCL_CHECK, then NPUException.cpp's formatErrorCode trailer: no rank
    # prefix on the lines, the trailer's RankID is the process's own rank
    lines = [STEP.format(s=n, n=n) for n in range(1, 4)] + [
        "Traceback (most recent call last):",
        '  File "/work/train.py", line 91, in <module>',
        "    dist.all_reduce(grad)",
        "RuntimeError: HCCL error in: /usr1/workspace/torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:2150, ",
        "[ERROR] 2025-03-02-08:14:11 (PID:51234, Device:6, RankID:14). ERR02200 DIST call hccl api failed.",
        "EI0006: 2025-03-02-08:14:11.337.120 Getting socket times out. Reason: 1. The remote does not initiate a connect request.",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "comm_error", inc
    assert_root(inc, path, 8, lines[7])
    assert inc["culprit"]["rank"] == 14, inc["culprit"]
    # a process that does not know its rank yet says -1: no culprit from it
    lines[7] = lines[7].replace("RankID:14", "RankID:-1")
    _code, doc, _path = run(lines)
    assert (verdict_incident(doc)["culprit"] or {}).get("rank") is None, doc["incidents"]


def test_tpu_cores_failing_the_mesh_rendezvous_are_victims(run: Run) -> None:
    # xla_multiprocessing.py's `Exception in device=` print around mesh_service.cc's XLA_ERROR
    err = "Exception in device=TPU:{d}: tensorflow/compiler/xla/xla_client/mesh_service.cc:364 : Failed to meet rendezvous 'epoch_end': Socket closed (14)"
    lines = [STEP.format(s=n, n=n) for n in range(1, 5)] + [
        err.format(d=2),
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.8/dist-packages/torch_xla/distributed/xla_multiprocessing.py", line 329, in _mp_start_fn',
        err.format(d=1),
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "comm_error", inc
    assert_root(inc, path, 5, lines[4])


def test_an_xla_out_of_memory_is_the_cause_the_other_hosts_errors_follow(run: Run) -> None:
    # the catalog's compile-time HBM OOM (openxla/xla docs/errors/error_1000.md) on one host of
    # a JAX job; the coordination service then reports the others
    lines = [STEP.format(s=n, n=n) for n in range(1, 4)] + [
        "Traceback (most recent call last):",
        '  File "/work/train.py", line 120, in <module>',
        "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 35.56G of 31.25G hbm. Exceeded hbm capacity by 4.32G.",
        "E0302 08:14:20.000000   4242 coordination_service_agent.cc:332] Polled an error from coordination service (this can be an error from this or another task).",
    ]
    category, _rank = told(run, lines, 5)
    assert category == "oom_gpu"


def test_tensorflow_names_the_device_whose_memory_ran_out(run: Run) -> None:
    oom = "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[256,1024,1024] and type float on /job:worker/replica:0/task:1/device:{device}:0 by allocator {allocator}"
    _doc, inc, _path = failed_verdict(run, [oom.format(device="GPU", allocator="GPU_0_bfc")])
    assert inc["category"] == "oom_gpu", inc
    _doc, inc, _path = failed_verdict(run, [oom.format(device="CPU", allocator="cpu")])
    assert inc["category"] == "oom_host", inc
    # the same status code about a gRPC message is no memory
    grpc = "tensorflow.python.framework.errors_impl.ResourceExhaustedError: Received message larger than max (2147483648 vs. 2147483647)"
    _doc, inc, _path = failed_verdict(run, [grpc])
    assert inc["category"] != "oom_gpu", inc


def test_tensorflows_collective_abort_carries_the_status_that_ended_the_step(run: Run) -> None:
    # base_collective_executor.cc StartAbort: a peer out of reach, or an op's own error
    abort = "2023-05-25 11:10:57.934361: E tensorflow/core/common_runtime/base_collective_executor.cc:249] BaseCollectiveExecutor::StartAbort {status}"
    tail = [
        "2023-05-25 11:10:57.934547: F tensorflow/core/distributed_runtime/rpc/grpc_server_lib.cc:103] Non-OK-status: Stop() status: UNIMPLEMENTED: Clean shutdown is not currently implemented",
        "Fatal Python error: Aborted",
    ]
    lines = [abort.format(status="DEADLINE_EXCEEDED: Deadline Exceeded"), *tail]
    category, _rank = told(run, lines, 0)
    assert category == "comm_error"
    lines = [abort.format(status="INVALID_ARGUMENT: indices[0,2] = 12444 is not in [0, 10000)")]
    _doc, inc, _path = failed_verdict(run, lines)
    assert inc["category"] == "python_exception", inc
    # a dataset iterator that ran out at an epoch's end: Keras's loop expects it
    steps = [f"Epoch 1/2 {n}/100 [====] - loss: 0.4{n}" for n in range(1, 4)]
    _code, doc, _path = run([*steps, abort.format(status="OUT_OF_RANGE: End of sequence"), *steps])
    assert doc["incidents"] == [], doc["incidents"]


def test_torch_npus_acl_result_codes_are_read_by_class(run: Run) -> None:
    # NPUException.h's checks with codes of NPUErrorCodes.h's table
    check = "RuntimeError: {func}:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:467 NPU function error: {call}, error code is {code}"
    for code, category in (
        (207018, "oom_gpu"),
        (507013, "gpu_hardware"),
        (507015, "cuda_error"),
    ):
        line = check.format(func="synchronize", call="AclrtSynchronizeDevice", code=code)
        _doc, inc, _path = failed_verdict(run, [STEP.format(s=1, n=1), line])
        assert inc["category"] == category, (code, inc)
    # the wait that timed out, as NPU_CHECK_WARN prints it (a warning, and the job stops on it):
    # a peer's failure seen from here, whose CANN message follows
    lines = [
        STEP.format(s=1, n=1),
        "[W compiler_depend.ts:487] Warning: NPU warning, error code is 507048[Error]: ",
        "[Error]: The execution of the internal task times out. ",
        "EI0002: [PID: 7277] 2024-11-28-11:59:30.645.648 The wait execution of the Notify register times out.",
    ]
    category, _rank = told(run, lines, 1)
    assert category == "collective_timeout"


def test_the_runtimes_own_timeouts_are_waits_and_torch_npus_trailer_keeps_their_kind(
    run: Run,
) -> None:
    # acl_base.h: 107019 ACL_ERROR_RT_WAIT_TIMEOUT, 107020 ACL_ERROR_RT_TASK_TIMEOUT; the
    # `[ERROR] ... ERR00100 PTA call acl api failed` trailer formatErrorCode appends to the error
    # says where (the ACL) and which rank, not what: the exception line before it says that
    for code in (107019, 107020):
        lines = [
            STEP.format(s=1, n=1),
            STEP.format(s=2, n=2),
            "[rank9]:     work.wait()",
            f"[rank9]: RuntimeError: npuSynchronizeDevice:torch_npu/csrc/core/npu/NPUStream.cpp:402 NPU error, error code is {code}",
            "[rank9]: [ERROR] 2025-02-11-08:02:17 (PID:4410, Device:1, RankID:9) ERR00100 PTA call acl api failed.",
            "[rank9]: EI9999: Inner Error!",
        ]
        _doc, inc, path = failed_verdict(run, lines)
        assert inc["category"] == "collective_timeout", (code, inc)
        assert_root(inc, path, 4, lines[3])
    # the trailer after a code of another class keeps that class
    lines[3] = lines[3].replace("107020", "507013")
    _doc, inc, _path = failed_verdict(run, lines)
    assert inc["category"] == "gpu_hardware", inc


def test_gaudis_device_memory_allocator_failing_is_the_cards_out_of_memory(run: Run) -> None:
    steps = [STEP.format(s=n, n=n) for n in range(1, 4)]
    error = "[rank2]: RuntimeError: [Rank:2] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::536870912 (512)MB"
    assert told(run, [*steps, "[rank2]: Traceback (most recent call last):", error], 4) == (
        "oom_gpu",
        2,
    )


def test_hccls_own_error_code_after_a_generic_acl_result_says_what_failed(run: Run) -> None:
    # a code outside the classes torch_npu's table names, then the CANN message with HCCL's
    # error code (CANN's HCCL Errors: EI0002 a collective's wait timed out, EI0013 an error
    # completion on the RoCE network, EI0004 a bad ranktable); the code is never a host
    sync = "npuSynchronizeDevice:/build/torch_npu/csrc/core/npu/NPUStream.cpp:370 NPU error, error code is 107019."
    # (a wait that timed out names the kind of failure; a fault of its own is the root)
    for cann, category, root in (
        (
            "EI0002: The wait execution of the Notify register times out. Reason: The Notify register has not received the Notify record from remote rank [2].",
            "collective_timeout",
            3,
        ),
        (
            "EI0013: [PID: 7741] 2025-06-02-11:20:33.101.442 An error CQE occurred during operator execution.",
            "comm_error",
            4,
        ),
        (
            "EI0004: The ranktable is invalid. Reason: server_count does not match.",
            "launcher_error",
            4,
        ),
    ):
        lines = [STEP.format(s=1, n=1), STEP.format(s=2, n=2), sync, cann]
        _doc, inc, path = failed_verdict(run, lines)
        assert inc["category"] == category, (cann, inc)
        assert_root(inc, path, root, lines[root - 1])
        assert inc["root_cause"]["host"] is None, inc["root_cause"]


def test_a_jax_plugin_that_failed_to_initialize_is_caught(run: Run) -> None:
    # xla_bridge.py discover_pjrt_plugins: logger.exception, then JAX goes on without it
    lines = [
        "ERROR:2025-03-02 08:13:00,410:jax._src.xla_bridge:444: Jax plugin configuration error: Exception when calling jax_plugins.xla_cuda12.initialize()",
        "Traceback (most recent call last):",
        '  File "/opt/venv/lib/python3.11/site-packages/jax_plugins/xla_cuda12/__init__.py", line 324, in initialize',
        "RuntimeError: jaxlib/cuda/versions_helpers.cc:113: operation cuInit(0) failed: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected",
        *(STEP.format(s=n, n=n) for n in range(1, 4)),
    ]
    _code, doc, _path = run(lines)
    assert doc["incidents"] == [], doc["incidents"]
    # a job that needed the GPU fails on its own line later
    need = "RuntimeError: Unable to initialize backend 'cuda': FAILED_PRECONDITION: No visible GPU devices. (you may need to uninstall the failing plugin package, or set JAX_PLATFORMS=cpu to skip this backend.)"
    _doc, inc, path = failed_verdict(run, [*lines[:4], need])
    assert_root(inc, path, 5, need)


def test_jax_falling_back_to_the_cpu_is_a_cuda_failure_the_program_went_on_from(run: Run) -> None:
    # xla_bridge.py _suggest_missing_backends (jax 0.4.35): the warning after backends() chose the CPU
    fallback = "WARNING:jax._src.xla_bridge:CUDA backend failed to initialize: jaxlib/cuda/versions_helpers.cc:112: operation gpuDeviceGetAttribute( &major, GPU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device) failed: CUDA_ERROR_NO_DEVICE (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for more info.)"
    devices = "Process {p}: Global devices: [CpuDevice(id=0), CpuDevice(id=1)], Local devices: [CpuDevice(id={p})]"
    _code, doc, path = run([fallback, devices.format(p=0), devices.format(p=1)])
    inc = verdict_incident(doc)
    assert inc["category"] == "cuda_error", inc
    assert_root(inc, path, 1, fallback)
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    # a later error of the program is how it ended
    later = "ValueError: expected 8 devices, found 2"
    _doc, inc, path = failed_verdict(run, [fallback, devices.format(p=0), later])
    assert _doc["job"]["outcome"] == "crashed", _doc["job"]


def test_xlas_cuinit_failing_on_a_host_without_a_gpu_is_no_failure(run: Run) -> None:
    # cuda_platform.cc InternalInit: LOG(ERROR) and the status handed back; JAX goes on (TPU here)
    cuinit = "E1203 11:02:07.118204  40211 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected"
    tpu = "Process 0: Global devices: [TpuDevice(id=0), TpuDevice(id=1)], Local devices: [TpuDevice(id=0)]"
    code, doc, _path = run([cuinit, tpu, *(STEP.format(s=n, n=n) for n in range(1, 4))])
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
    # a job that needed the GPU fails on its own line, which is the root
    need = "RuntimeError: Unable to initialize backend 'cuda': FAILED_PRECONDITION: No visible GPU devices. (you may need to uninstall the failing plugin package, or set JAX_PLATFORMS=cpu to skip this backend.)"
    _doc, inc, path = failed_verdict(run, [cuinit, need])
    assert_root(inc, path, 2, need)


def test_a_driver_result_named_by_its_enum_is_the_cut_traceback_s_cause(run: Run) -> None:
    # XLA's platform_util.cc warning quoting cuda.h's CUresult name, then JAX's traceback, cut
    xla = "2025-02-11 14:03:19.204117: W external/xla/xla/service/platform_util.cc:199] unable to create StreamExecutor for CUDA:3: failed initializing StreamExecutor for CUDA device ordinal 3: INTERNAL: Failed call to cuDeviceGet: CUDA_ERROR_INVALID_DEVICE: invalid device ordinal"
    lines = [
        xla,
        "Traceback (most recent call last):",
        '  File "/opt/venv/lib/python3.11/site-packages/jax/_src/xla_bridge.py", line 879, in backends',
        "    backend = _init_backend(platform)",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "cuda_error", inc
    assert_root(inc, path, 1, xla)


def test_a_neuron_hardware_error_is_the_cause_of_the_other_workers_collective_hang(
    run: Run,
) -> None:
    # nrt-troubleshoot.rst's hardware-error table and its `Hang on Collectives` message, in the
    # runtime's `<date> <pid>:<tid> LEVEL MODULE:function message` lines
    hang = "2025-Mar-02 08:44:{s:02d}.000{p}00 {p}:{p}90 ERROR  TDRV:exec_consume_infer_status_notifications (FATAL-RT-UNDEFINED-STATE) missing collectives status on Neuron Device 0 NC {p}, model 0 - suspected hang in collectives operation 7 out of 100"
    hw = "2025-Mar-02 08:14:21.000123 4711:4790 ERROR  TDRV:exec_consume_infer_status_notifications (FATAL-RT-UNDEFINED-STATE) [ND 3][NC 1] Uncorrectable memory error is detected, metadata: 0x16. Please terminate or stop/start this instance to avoid future impact from the hardware error."
    steps = [STEP.format(s=n, n=n) for n in range(1, 4)]
    lines = [*steps, hw, hang.format(s=1, p=5), hang.format(s=2, p=6)]
    category, _rank = told(run, lines, 3)
    assert category == "gpu_hardware"
    # without it, the hang is the story, and it names no cause of its own
    _doc, inc, _path = failed_verdict(run, [*steps, hang.format(s=1, p=5)])
    assert inc["category"] == "collective_timeout", inc
    # the collectives engine failing to set up its rings is a communication error, and the
    # runtime's device errors are the accelerator runtime's
    enc = "2025-Jan-07 08:09:10.123456 2211:2290 ERROR   ENC:init_metaring_algorithm                 [nec_dev 3 ch 1] failed to reuse global comm devmem reservation"
    assert told(run, [*steps, enc], 3)[0] == "comm_error"
    cores = "2025-Jan-07 08:09:10.123456 2211:2211 ERROR   NRT:nrt_allocate_neuron_cores               NeuronCore(s) not available - Requested:nc1-nc1 Available:0"
    assert told(run, [*steps, cores], 3)[0] == "cuda_error"


def test_neuron_collectives_waiting_at_the_end_hang_and_a_run_that_went_on_outlived_them(
    run: Run,
) -> None:
    # nrt-troubleshoot.rst's `Communication timeout` messages in the runtime's CCOM WARN header;
    # AWS: not fatal, the ranks wait for a late peer forever
    wait = "2025-Mar-02 08:16:{s:02d}.0241 4711:47{s:02d} [{s}] include/socket.h:579 CCOM WARN Timeout waiting for RX (waited 120 sec) - retrying"
    steps = [STEP.format(s=n, n=n) for n in range(1, 4)]
    _code, doc, path = run([*steps, wait.format(s=1), wait.format(s=2)])
    inc = verdict_incident(doc)
    assert (inc["category"], doc["job"]["outcome"]) == ("hang", "hung"), (inc, doc["job"])
    assert_root(inc, path, 4, wait.format(s=1))
    # the late peer joined (its graph compiled) and training went on (HF Trainer's log dicts)
    later = [
        f"{{'loss': 2.{n:02d}, 'learning_rate': 4.9e-05, 'epoch': 0.{n:02d}}}"
        for n in range(20, 26)
    ]
    _code, doc, _ = run([*steps, wait.format(s=1), *later])
    assert doc["incidents"] == [], doc["incidents"]
    # OFI's failed init on a single instance without EFA is harmless (AWS's quickstart)
    ofi = "2026-Apr-13 01:46:31.0683 837617:837663 [2] net_plugin.cc:97 CCOM WARN OFI plugin initNet() failed is EFA enabled?"
    _code, doc, _ = run([ofi, *steps])
    assert doc["incidents"] == [], doc["incidents"]


def test_the_ccom_warning_before_a_neuron_collectives_error_says_where_it_began(run: Run) -> None:
    # training-troubleshooting.rst: libnccom's `CCOM WARN` of the call that failed, then the
    # engine's error for it, in the same process (pid:tid)
    warn = "2025-Jun-14 19:05:29.0312 4112959:4113326 [23] bootstrap.cc:106 CCOM WARN Call to accept failed : Too many open files"
    enc = "2025-Jun-14 19:05:29.0312 4112959:4113326 ERROR   ENC:ncclBootstrapRecv                       failed neuronBootstrapRecv request to NCCL"
    steps = [STEP.format(s=n, n=n) for n in range(1, 4)]
    _doc, inc, path = failed_verdict(run, [*steps, warn, enc])
    assert inc["category"] == "comm_error", inc
    assert_root(inc, path, 4, warn)
    # alone, a CCOM WARN that training went on after is no failure
    _code, doc, _ = run([warn, *steps, *steps])
    assert doc["incidents"] == [], doc["incidents"]


def test_gaudi_s_synapse_status_is_read_by_its_name(run: Run) -> None:
    # the Gaudi bridge's `synStatus=synStatus <code> [<name>]` in the exception a rank raises
    steps = [STEP.format(s=n, n=n) for n in range(1, 4)]
    frame = [
        "[rank5]: Traceback (most recent call last):",
        '[rank5]:   File "/usr/local/lib/python3.10/dist-packages/torch/distributed/distributed_c10d.py", line 2425, in broadcast',
        "[rank5]:     work = default_pg.broadcast([tensor], opts)",
    ]
    for name, category in (
        ("26 [Generic failure]", "cuda_error"),
        ("4 [Out of device memory]", "oom_gpu"),
        ("17 [Device reset]", "gpu_hardware"),
    ):
        error = f"[rank5]: RuntimeError: Graph compile failed. synStatus=synStatus {name}."
        assert told(run, [*steps, *frame, error], 6) == (category, 5)


GRPC_DETAIL = [
    "Additional GRPC error information from remote target unknown_target_for_coordination_leader while calling /tensorflow.CoordinationService/GetKeyValue:",
    ':{"created":"@1706696495.008693800","description":"Error received from peer ipv4:10.150.0.4:62464","file":"external/com_github_grpc_grpc/src/core/lib/surface/call.cc","file_line":1056,"grpc_message":"Socket closed","grpc_status":14}. This is only expected if one of the tasks is unhealthy.',
]


def test_the_preemption_notice_failing_as_the_leader_leaves_is_no_failure(run: Run) -> None:
    # preemption_sync_manager.cc: the call each process keeps open to task 0's service fails when
    # task 0 exits first at the end of a run; the gRPC detail lines go on the same status
    done = [f"{p} [[1. 1. 1. 1.]] {{cuda(id={p})}}" for p in range(4)]
    notice = "2024-01-31 10:21:35.025511: W external/tsl/tsl/distributed_runtime/preemption/preemption_sync_manager.cc:170] Failed to retrieve preemption notice from coordination service: UNAVAILABLE: Socket closed"
    _code, doc, _path = run([*done, notice, *GRPC_DETAIL])
    assert doc["incidents"] == [], doc["incidents"]


def test_a_coordination_agent_in_error_status_ends_the_process(run: Run) -> None:
    # xla/pjrt/distributed/client.cc's error callback: the status after the gRPC detail of the call
    agent = "2024-04-12 23:39:41.656900: E external/xla/xla/pjrt/distributed/client.cc:96] Coordination service agent in error status: DEADLINE_EXCEEDED: Deadline Exceeded"
    lines = [*GRPC_DETAIL, agent]
    assert told(run, lines, 2)[0] == "comm_error"
    # at shutdown, the agent that cannot say goodbye: the leader left first
    bye = "2023-02-17 06:08:24.084633: E external/org_tensorflow/tensorflow/tsl/distributed_runtime/coordination/coordination_service_agent.cc:481] Failed to disconnect from coordination service with status: DEADLINE_EXCEEDED: Deadline Exceeded"
    assert told(run, [bye, *GRPC_DETAIL], 0)[0] == "comm_error"


def test_the_cann_runtimes_task_timeout_is_the_wait_the_exception_after_it_reports(
    run: Run,
) -> None:
    # device_error_proc.cc's report of an HCCL task past its timeout, filed under the inner error
    # `EI9999`, then the framework's log of the dying worker and torch_npu's exception: no rank
    # prefix anywhere, one process's report
    wait = "EI9999: 2025-05-14-03:10:41.002.731  The error from device(chipId:{d}, dieId:0), serial number is 4, hccl fftsplus task timeout occurred during task execution, stream_id:6, sq_id:6, task_id:2210, stuck notify num:1, timeout=30min(default).[FUNC:ProcessStarsHcclFftsPlusTimeoutErrorInfo][FILE:device_error_proc.cc][LINE:1402]"
    lines = [STEP.format(s=n, n=n) for n in range(1, 4)] + [
        "EI9999: Inner Error!",
        wait.format(d=1),
        "        TraceBack (most recent call last):",
        "        rtStreamSynchronizeWithTimeout execute failed, reason=[task timeout][FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:53]",
        "",
        "2025-05-14 03:10:41,120 - serve - ERROR - worker.py:212 - worker 1 failed.",
        "Traceback (most recent call last):",
        '  File "/srv/engine/worker.py", line 208, in _loop',
        "    dist.broadcast_object_list(inputs)",
        "RuntimeError: ACL stream synchronize failed.",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "collective_timeout", inc
    assert_root(inc, path, 5, lines[4])
    # a fault of the task itself is the cause, and the runtime's call that found it says no more
    lines[4] = (
        "EZ9999: 2025-05-14-03:10:41.002.731  The error from device(1), serial number is 4, there is an error of aicore, core id is 3, error code = 0x800000, dump info: pc start: 0x12c0c0016000, current: 0x12c0c0016a44, errorStr: The DDR address of the MTE instruction is out of range."
    )
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "cuda_error", inc
    assert_root(inc, path, 5, lines[4])


def test_an_exception_long_after_an_unranked_timeout_is_its_own(run: Run) -> None:
    # the wait's consequence is the burst right after it; an error printed well after the wait
    # (past a burst of other output) is not taken for it
    wait = "EI9999: 2025-05-14-03:10:41.002.731  The error from device(chipId:1, dieId:0), serial number is 4, notify wait timeout occurred during task execution, stream_id:6, sq_id:6, task_id:2210, notify_id=3, timeout=1800s."
    lines = [STEP.format(s=n, n=n) for n in range(1, 4)] + [wait]
    lines += [STEP.format(s=n % 60, n=n) for n in range(4, 60)]
    lines += [
        "Traceback (most recent call last):",
        '  File "/work/train.py", line 3, in <module>',
        "KeyError: 'labels'",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "python_exception", inc
    assert_root(inc, path, len(lines), lines[-1])


def test_the_rank_in_the_trailer_of_an_unprefixed_report_names_its_culprit(run: Run) -> None:
    # torch_npu raises the HCCL check, its trailer names the process's rank, and the CANN
    # message the runtime appended says why: the cause is the CANN line, the rank the trailer's
    lines = [STEP.format(s=n, n=n) for n in range(1, 4)] + [
        "Traceback (most recent call last):",
        '  File "/work/train.py", line 40, in <module>',
        "    dist.barrier()",
        "RuntimeError: [ERROR] HCCL error in: torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:64",
        "[ERROR] 2025-01-09-10:11:12 (PID:4411, Device:2, RankID:6) ERR02200 DIST call hccl api failed.",
        "EJ0001: 2025-01-09-10:11:12.131.415 Failed to initialize the HCCP process. Reason: Maybe the last training process is running.",
    ]
    _doc, inc, _path = failed_verdict(run, lines)
    assert inc["category"] == "launcher_error", inc
    assert inc["culprit"]["rank"] == 6, inc["culprit"]
    assert "same error report" in inc["culprit"]["reason"], inc["culprit"]
