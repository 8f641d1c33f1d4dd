# ruff: noqa: E501  (log lines are kept whole)
"""An error before the training loop says it came to its end (it returned, saved its final
checkpoint, ran its last epoch) did not stop training: it is a note, not the failure
(logscope/analysis/survived.py). A launcher's report of a process's end, or the scheduler's, in the
incident says a process did end. Lines are built from their emitters' format strings."""

from __future__ import annotations

from .helpers import Run

# an S3 client's error record (aws-sdk-cpp AWSError's operator<<, through TensorFlow's S3
# filesystem logger), printed for an object that is not there: a probe the program goes on from
PROBE = [
    "2020-02-21 23:21:46.725864: E tensorflow/core/platform/s3/aws_logging.cc:60] HTTP response code: 404",
    "Exception name: ",
    "Error message: No response body.",
    "8 response headers:",
]


def test_an_error_before_the_loop_said_it_returned_is_a_note(run: Run) -> None:
    lines = ["Train and evaluate", *PROBE, "Training done", "Export saved model"]
    code, doc, _path = run(lines)
    assert (code, doc["incidents"]) == (0, []), doc["incidents"]
    assert doc["job"]["outcome"] == "completed", doc["job"]
    assert any("came to its end" in s["reason"] for s in doc["survived"]), doc["survived"]


def test_a_process_the_launcher_saw_end_is_no_note_for_a_loop_that_returned_elsewhere(
    run: Run,
) -> None:
    # torchrun's agent reports worker 1's exit; worker 0's script still prints its last words
    lines = [
        "[rank1]: RuntimeError: shard 17 of the dataset is unreadable",
        "E1202 10:14:03.551000 811 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 1 (pid: 812) of binary: /usr/bin/python3",
        "[rank0]: Training is finished",
    ]
    code, doc, _path = run(lines)
    assert code != 0 and doc["incidents"], doc["job"]


def test_a_launchers_teardown_after_its_workers_finished_is_no_failure(run: Run) -> None:
    # logging's `%(asctime)s %(levelname)-8s %(message)s` in the script; then torchrun's agent: its
    # exit barrier (api.py _exit_barrier, only once its workers succeeded) found the store gone,
    # and closing the rendezvous failed (dynamic_rendezvous.py shutdown)
    steps = [
        f"2024-10-08T13:25:{s:02d}Z INFO     Train Epoch: 2 [{s * 1280}/60000 ({s * 2}%)]\tloss={1.0 - s / 100:.4f}"
        for s in range(1, 12)
    ]
    lines = [
        *steps,
        "2024-10-08T13:25:54Z INFO     Training is finished",
        "[2024-10-08 13:25:59,467] torch.distributed.elastic.agent.server.api: [ERROR] Error waiting on exit barrier. Elapsed: 0.0046 seconds",
        "[2024-10-08 13:25:59,468] torch.distributed.elastic.rendezvous.dynamic_rendezvous: [WARNING] The node 'trainer-0_7_0' has failed to shutdown the rendezvous 'none' due to an error of type RendezvousConnectionError.",
    ]
    code, doc, _path = run(lines)
    assert (code, doc["incidents"]) == (0, []), doc["incidents"]
    assert doc["job"]["outcome"] == "completed", doc["job"]
