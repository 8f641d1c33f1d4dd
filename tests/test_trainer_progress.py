# ruff: noqa: E501  (log lines are kept whole)
"""Whole-log behaviour of trainers' own progress and ending lines read from their sources
(patterns/openmmlab.toml, timm.toml, paddle.toml, mlperf.toml, verl.toml, progress.toml,
nnunet.toml): a run by iterations that reached its last one completed, an error the steps went on
after is a survived note, a save notice is a checkpoint. Lines are constructed from the emitters' format strings (see
each pattern file's header)."""

from __future__ import annotations

from .helpers import Run, assert_root, failed_verdict


def _mmcv_iter(i: int, total: int, t: str) -> str:
    return f"2021-08-02 {t},567 - mmseg - INFO - Iter [{i}/{total}]\tlr: 9.103e-03, eta: 0:12:00, time: 0.629, data_time: 0.007, memory: 9872, decode.loss_seg: 0.2719, loss: 0.3821"


def test_an_openmmlab_run_by_iterations_that_reached_max_iters_completed(run: Run) -> None:
    steps = [_mmcv_iter(i, 400, f"16:{i // 50:02d}:00") for i in range(50, 401, 50)]
    # a corrupt image the data pipeline logged with its traceback, and the steps went on
    lines = [
        *steps[:2],
        "Traceback (most recent call last):",
        '  File "mmseg/datasets/pipelines/loading.py", line 61, in __call__',
        "OSError: image file is truncated (4 bytes not processed)",
        *steps[2:4],
        "2021-08-02 16:04:01,999 - mmseg - INFO - Saving checkpoint at 200 iterations",
        *steps[4:],
    ]
    code, doc, _path = run(lines)
    assert code == 0, doc["job"]
    job = doc["job"]
    assert (job["outcome"], job["last_iteration"], job["train_iters"]) == ("completed", 400, 400)
    [note] = doc["survived"]
    assert note["kind"] == "survived" and note["first"]["line"] == 5, note
    # the same log cut before its last step: a run still going, not a completed one
    code, doc, _path = run(lines[:-1])
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def test_an_openmmlab_run_by_iterations_that_saved_at_its_last_iteration_completed(
    run: Run,
) -> None:
    """The save at iteration N, which the step lines count to, before the last step's own line
    and the evaluation after it."""
    steps = [_mmcv_iter(i, 400, f"16:{i // 50:02d}:00") for i in range(50, 351, 50)]
    save = "2021-08-02 16:08:01,999 - mmseg - INFO - Saving checkpoint at {} iterations"
    val = "2021-08-02 16:09:11,310 - mmseg - INFO - Iter(val) [500]\tmIoU: 0.5247, mAcc: 0.6377"
    code, doc, _path = run([*steps, save.format(400), val])
    assert code == 0 and doc["job"]["outcome"] == "completed", doc["job"]
    # a save before the last iteration says the run went on
    code, doc, _path = run([*steps, save.format(350), val])
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def _mmcv_epoch(epoch: int, i: int, t: str) -> str:
    return f"2020-10-18 {t},181 - mmdet - INFO - Epoch [{epoch}][{i}/1875]\tlr: 1.000e-04, eta: 0:40:00, time: 1.379, data_time: 0.646, memory: 6043, loss_cls: 0.6677, loss_bbox: 0.3473, loss: 1.0150"


def test_an_evaluation_after_the_last_step_is_a_sign_of_life(run: Run) -> None:
    """After an epoch's last logged step, mmcv's hooks save the checkpoint and run the whole
    validation set, which logs nothing until its result (`Epoch(val) [e][n]`): minutes of
    silence that end in a result are the run at work, not a hang."""
    epoch = [_mmcv_epoch(3, i, f"16:{i // 50:02d}:00") for i in range(50, 1851, 50)]
    tail = [
        "2020-10-18 16:37:32,021 - mmdet - INFO - Saving checkpoint at 3 epochs",
        "2020-10-18 16:48:07,777 - mmdet - INFO - Evaluating bbox...",
        # the evaluation's own complaint (mmdet's coco.py), stamped: the log's last moment
        "2020-10-18 16:48:07,779 - mmdet - ERROR - The testing results of the whole dataset is empty.",
        "2020-10-18 16:48:07,795 - mmdet - INFO - Epoch(val) [3][1875]\tbbox_mAP: 0.2140, bbox_mAP_50: 0.3790",
    ]
    code, doc, _path = run([*epoch, *tail])
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    # no result at the end: eleven minutes without a step, a save's floor passed, is a hang
    code, doc, _path = run([*epoch, *tail[:3]])
    assert doc["job"]["outcome"] == "hung", doc["job"]


def test_an_openmmlab_run_that_saved_after_the_last_epoch_its_config_set_completed(
    run: Run,
) -> None:
    """OpenMMLab runners print no line when training ends; the config dump states the epochs
    (mmcv's runner dict, mmengine's train_cfg with sorted keys), and the checkpoint hook saves
    after the last one."""
    config = [
        "2020-10-18 15:00:00,001 - mmdet - INFO - Config:",
        "optimizer = dict(type='SGD', lr=0.02, momentum=0.9, weight_decay=0.0001)",
        "runner = dict(type='EpochBasedRunner', max_epochs=2)",
        "checkpoint_config = dict(interval=1)",
    ]
    epochs = [
        *(_mmcv_epoch(1, i, f"15:{i // 50:02d}:00") for i in range(50, 1851, 50)),
        "2020-10-18 15:37:32,021 - mmdet - INFO - Saving checkpoint at 1 epochs",
        "2020-10-18 15:48:07,795 - mmdet - INFO - Epoch(val) [1][1875]\tbbox_mAP: 0.2140",
        *(_mmcv_epoch(2, i, f"16:{i // 50:02d}:00") for i in range(50, 1851, 50)),
        "2020-10-18 16:37:32,021 - mmdet - INFO - Saving checkpoint at 2 epochs",
    ]
    code, doc, _path = run([*config, *epochs])
    assert code == 0, doc["job"]
    assert doc["job"]["outcome"] == "completed", doc["job"]
    assert "after the last epoch" in doc["job"]["outcome_reason"], doc["job"]
    # a result after it is still the same finished run; mmengine states the epochs in train_cfg
    mmengine = "train_cfg = dict(max_epochs=2, type='EpochBasedTrainLoop', val_interval=1)"
    val = "2020-10-18 16:48:07,795 - mmdet - INFO - Epoch(val) [2][1875]\tbbox_mAP: 0.2540"
    code, doc, _path = run([config[0], mmengine, *epochs, val])
    assert doc["job"]["outcome"] == "completed", doc["job"]
    # set to train three: the save after the second is one more epoch's, the log stops there
    code, doc, _path = run([config[0], config[2].replace("=2", "=3"), *epochs])
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    # no config dump in the log: nothing says which epoch was the last
    code, doc, _path = run(epochs)
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    # steps of a further epoch after the save: training went on past the planned end (a
    # second run in one log), not a finished one
    code, doc, _path = run([*config, *epochs, _mmcv_epoch(3, 50, "16:50:00")])
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def test_openmims_word_after_the_training_script_returned_ends_the_run(run: Run) -> None:
    """`mim train` runs the script with check_call and, when it returned 0, prints its success
    in green (click.secho): the run completed; the steps alone say nothing of the end."""
    steps = [_mmcv_epoch(2, i, f"16:{i // 50:02d}:00") for i in range(50, 301, 50)]
    done = "\x1b[32mTraining finished successfully. \x1b[0m"
    code, doc, _path = run([*steps, done])
    assert code == 0 and doc["job"]["outcome"] == "completed", doc["job"]
    code, doc, _path = run(steps)
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def test_an_openmmlab_save_notice_is_the_last_checkpoint_before_a_crash(run: Run) -> None:
    lines = [
        *(_mmcv_iter(i, 9000, f"16:{i // 50:02d}:00") for i in range(50, 201, 50)),
        "2021-08-02 16:04:01,999 - mmseg - INFO - Saving checkpoint at 200 iterations",
        *(_mmcv_iter(i, 9000, f"16:{i // 50:02d}:00") for i in range(250, 401, 50)),
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB",
    ]
    code, doc, _path = run(lines)
    assert code == 1, doc["job"]
    # the loop's next step shows the save written: the work since it is what the crash lost
    [attempt] = doc["attempts"]
    assert [c["iteration"] for c in attempt["checkpoints"]] == [200], attempt
    assert attempt["unfinished_saves"] == [], attempt
    [lost] = doc["ledger"]["incidents"]
    assert lost["last_checkpoint_iteration"] == 200, lost


def test_mmengines_logger_header_is_read_with_its_time_and_its_steps_are_progress(
    run: Run,
) -> None:
    # mmengine's terminal datefmt has no year, its file datefmt one; epochs are right-aligned
    lines = [
        f"2023/02/14 19:{m:02d}:27 - mmengine - INFO - Epoch(train)  [{e}][{s:>4}/1250]  lr: 4.0000e-04  eta: 0:03:11  time: 0.3803  data_time: 0.0034  memory: 9870  loss: 0.4121  loss_cls: 0.1000"
        for m, (e, s) in enumerate((e, s) for e in (9, 10) for s in (50, 600, 1250))
    ]
    lines.append("2023/02/14 19:06:30 - mmengine - ERROR - Traceback (most recent call last):")
    lines.append("KeyError: 'gt_bboxes'")
    code, doc, _path = run(lines)
    assert code == 1, doc["job"]
    assert doc["job"]["start"] == "2023-02-14T19:00:27", doc["job"]
    assert doc["training"]["loss"] == [0.4121] * 6, doc["training"]
    assert doc["job"]["last_progress"] == "2023-02-14T19:05:27", doc["job"]
    [inc] = doc["incidents"]
    assert inc["root_cause"]["line"] == 8, inc["root_cause"]


def _timm_step(epoch: int, step: int) -> str:
    return f"Train: {epoch} [{step:>4d}/1251 ({100 * (step + 1) / 1251:>3.0f}%)]  Loss: 3.41 (3.52)  Time: 0.377s, 2718.34/s  (0.381s, 2687.01/s)  LR: 9.834e-04  Data: 0.012 (0.015)"


def test_timms_best_metric_line_ends_its_training_loop(run: Run) -> None:
    lines = [
        "Training in distributed mode with multiple processes, 1 device per process.Process 0, total 8, device cuda:0.",
        *(_timm_step(e, s) for e in (298, 299) for s in (0, 600, 1200, 1250)),
        "Current checkpoints:",
        " ('./output/train/model_best.pth.tar', 80.412)",
        "*** Best metric: 80.412 (epoch 296)",
    ]
    code, doc, _path = run(lines)
    assert code == 0, doc["job"]
    assert doc["job"]["outcome"] == "completed", doc["job"]
    assert len(doc["training"]["loss"]) == 8, doc["training"]
    # without it the log stops while training still progressed
    code, doc, _path = run(lines[:-1])
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def test_an_hf_trainer_save_is_complete_once_the_loop_logs_again(run: Run) -> None:
    # Trainer._save_checkpoint writes everything before the loop goes on and logs nothing after
    lines = [
        "{'loss': 2.1043, 'grad_norm': 1.52, 'learning_rate': 4.8e-05, 'epoch': 0.31}",
        "[INFO|trainer.py:3503] 2024-06-01 10:00:00,123 >> Saving model checkpoint to out/run1/checkpoint-500",
        "{'loss': 2.0011, 'grad_norm': 1.48, 'learning_rate': 4.7e-05, 'epoch': 0.33}",
        "{'loss': 1.9871, 'grad_norm': 1.41, 'learning_rate': 4.6e-05, 'epoch': 0.35}",
        "[INFO|trainer.py:3503] 2024-06-01 10:20:00,123 >> Saving model checkpoint to out/run1/checkpoint-1000",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.15 GiB of which 1.12 GiB is free.",
    ]
    code, doc, _path = run(lines)
    assert code == 1, doc["job"]
    [attempt] = doc["attempts"]
    # the save the loop stepped past is written; the one the crash came during is not
    assert [c["iteration"] for c in attempt["checkpoints"]] == [500], attempt
    assert attempt["unfinished_saves"] == [1000], attempt


def _megatron_iteration(n: int, total: int) -> str:
    return (
        f" iteration {n:8d}/{total:8d} | consumed samples: {n * 64:12d} | elapsed time per "
        f"iteration (ms): 812.4 | learning rate: 1.000E-04 | global batch size:    64 | "
        f"lm loss: {7.0 - n * 0.01:.6E} | loss scale: 1.0 | grad norm: 1.234 |"
    )


def test_megatrons_training_loop_returning_with_nothing_failing_after_is_a_finished_run(
    run: Run,
) -> None:
    # pretrain() prints `[after training is done]` when train() returns; a run whose log
    # interval does not divide train_iters never logs its last iteration
    lines = [
        *(_megatron_iteration(n, 1005) for n in range(100, 1001, 100)),
        "[after training is done] datetime: 2025-03-21 13:17:29 ",
        "rank:0, trace log has been written to txt...",
    ]
    code, doc, _path = run(lines)
    assert code == 0, doc["job"]
    assert doc["job"]["outcome"] == "completed", doc["job"]
    # without it the log stops while training still progressed
    code, doc, _path = run([*lines[:10], lines[-1]])
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def test_deepspeeds_report_at_engine_start_is_no_step(run: Run) -> None:
    # engine.py: `_report_progress(0)` once the optimizer is built, before any step; Megatron
    # builds its data iterators after it (a minute here) and then starts training
    ds = "[2022-09-19 00:{t}] [INFO] [logging.py:68:log_dist] [Rank 0] step={n}, skipped=0, lr=[1e-05], mom=[(0.9, 0.95)]"
    lines = [
        "[2022-09-19 00:20:10,935] [INFO] [launch.py:162:main] dist_world_size=4",
        ds.format(t="20:22,170", n=0),
        "> building train, validation, and test datasets ...",
        "[after dataloaders are built] datetime: 2022-09-19 00:21:22 ",
        "[before the start of training step] datetime: 2022-09-19 00:21:22 ",
        *(ds.format(t=f"{22 + n // 10}:{n % 60:02d},000", n=n) for n in range(10, 60, 10)),
    ]
    code, doc, _path = run(lines)
    assert code == 0, doc["job"]
    assert doc["incidents"] == [], doc["incidents"]
    assert (doc["job"]["outcome"], doc["job"]["first_iteration"]) == ("truncated", 10), doc["job"]


def _nnunet_epoch(e: int) -> list[str]:
    # nnUNetTrainer's print_to_log_file on local rank 0: `{datetime}: ` and its words
    t = f"2024-04-0{1 + e // 24} {e % 24:02d}:1{e % 6}:26.409347: "
    return [
        f"{t}",
        f"{t}Epoch {e}",
        f"{t}Current learning rate: 0.00{9 - e}",
        f"{t}train_loss -0.{60 + e}",
        f"{t}val_loss -0.{58 + e}",
        f"{t}Pseudo dice [0.8{e}, 0.7{e}]",
        f"{t}Epoch time: 151.{e}2 s",
    ]


def test_an_nnunet_run_that_says_training_done_completed(run: Run) -> None:
    lines = [line for e in range(5) for line in _nnunet_epoch(e)]
    done = "2024-04-01 05:20:11.512873: Training done."
    code, doc, _path = run([*lines, done])
    assert code == 0, doc["job"]
    assert doc["job"]["outcome"] == "completed", doc["job"]
    # without it the log stops while epochs still began
    code, doc, _path = run(lines)
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def test_an_error_line_nnunet_epochs_went_on_after_is_survived(run: Run) -> None:
    noise = (
        "2024-04-01 00:10:26.173235: failed to open the plotting backend, make sure it is installed"
    )
    lines = [*_nnunet_epoch(0), noise, *(line for e in range(1, 6) for line in _nnunet_epoch(e))]
    code, doc, _path = run(lines)
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
    assert doc["survived"], doc


def test_batchgenerators_dead_workers_are_the_data_pipeline(run: Run) -> None:
    # multi_threaded_augmenter.py: the loader says a worker process is gone
    lines = [
        *_nnunet_epoch(0),
        "Traceback (most recent call last):",
        '  File "nnunetv2/training/nnUNetTrainer/nnUNetTrainer.py", line 1348, in run_training',
        "RuntimeError: One or more background workers are no longer alive. Exiting. Please check the print statements above for the actual error message",
    ]
    code, doc, _path = run(lines)
    assert code == 1 and doc["incidents"][0]["category"] == "data_error", doc["incidents"]


def _paddleseg_step(i: int, total: int) -> str:
    return f"2023-05-10 08:{i // 100:02d}:{i % 60:02d} [INFO]\t[TRAIN] epoch: {1 + i // 400}, iter: {i}/{total}, loss: 0.4312, lr: 0.009731, batch_cost: 0.3021, reader_cost: 0.00112, ips: 26.4812 samples/sec | ETA 00:00:{(total - i) % 60:02d}"


def test_a_paddleseg_run_whose_steps_reach_its_iters_completed(run: Run) -> None:
    lines = [
        *(_paddleseg_step(i, 1000) for i in range(100, 1001, 100)),
        # the FLOPs count after the loop (paddle.flops), whose notices are not failures
        "Cannot find suitable count function for <class 'paddle.nn.layer.pooling.MaxPool2D'>. Treat it as zero FLOPs.",
        "Total Flops: 437453619200     Total Params: 52608512",
    ]
    code, doc, _path = run(lines)
    assert code == 0, doc["job"]
    job = doc["job"]
    assert (job["outcome"], job["last_iteration"], job["train_iters"]) == ("completed", 1000, 1000)
    assert len(doc["training"]["loss"]) == 10, doc["training"]
    # stopped before its last step: still going
    code, doc, _path = run(lines[:8])
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def _paddleclas_step(epoch: int, step: int) -> str:
    return f"[2023/05/10 08:{epoch:02d}:{step // 25:02d}] ppcls INFO: [Train][Epoch {epoch}/20][Iter: {step}/1251]lr(LinearWarmup): 0.20000000, CELoss: 5.21034, loss: 5.21034, batch_cost: 0.31210s, reader_cost: 0.01030, ips: 820.2841 samples/s, eta: 0:10:00"


def test_paddleclas_average_of_its_last_epoch_ends_its_training_loop(run: Run) -> None:
    def epoch(e: int) -> list[str]:
        steps = [_paddleclas_step(e, s) for s in (0, 600, 1200)]
        return [
            *steps,
            f"[2023/05/10 08:{e:02d}:50] ppcls INFO: [Train][Epoch {e}/20][Avg]CELoss: 1.51030, loss: 1.51030",
        ]

    lines = [*epoch(19), *epoch(20)]
    code, doc, _path = run(lines)
    assert code == 0, doc["job"]
    assert doc["job"]["outcome"] == "completed", doc["job"]
    assert len(doc["training"]["loss"]) == 6, doc["training"]
    # the logger's `[%Y/%m/%d %H:%M:%S] ppcls INFO: ` header gives each line its time
    assert (doc["job"]["start"], doc["job"]["end"]) == (
        "2023-05-10T08:19:00",
        "2023-05-10T08:20:50",
    )
    # the average of an epoch before the last says the loop goes on
    code, doc, _path = run(epoch(19))
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def test_mlperfs_older_loggers_say_the_run_stopped(run: Run) -> None:
    # v0.6's mlp_log (`:::MLL <s> <key>: <json>`) and v0.5's mlperf_compliance
    # (`:::MLPv0.5.0 <benchmark> <s> (<file>:<line>) <key>: <value>`)
    for stop in (
        ':::MLL 1560722749.842 run_stop: {"value": null, "metadata": {"status": "success", "file": "common/fit.py", "lineno": 491}}',
        ':::MLPv0.5.0 resnet 1541553432.123 (main.py:412) run_stop: {"success": false}',
    ):
        lines = ["Epoch[88] Batch [20-40]\tSpeed: 81235.11 samples/sec", stop]
        code, doc, _path = run(lines)
        assert (code, doc["job"]["outcome"]) == (0, "completed"), (stop, doc["job"])
        code, doc, _path = run(lines[:1])
        assert doc["job"]["outcome"] == "truncated", doc["job"]


def test_verls_training_loop_says_it_returned_after_its_last_step(run: Run) -> None:
    # ray_trainer.py fit(): pprint of the final metrics, then return (Ray's actor prefix)
    steps = [
        f"(TaskRunner pid=2871) step:{n} - actor/pg_loss:0.01{n} - critic/score/mean:0.8{n}"
        for n in range(1, 4)
    ]
    final = "(TaskRunner pid=2871) 'Final validation metrics: {'val-core/openai/gsm8k/reward/mean@1': 0.8711}'"
    code, doc, _path = run([*steps, final])
    assert (code, doc["job"]["outcome"]) == (0, "completed"), doc["job"]
    code, doc, _path = run(steps)
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def test_verls_console_step_lines_are_progress_a_run_outlives_an_error_line_by(run: Run) -> None:
    # concat_dict_to_str's `step:N - key:value` lines after a reward worker's logged error
    noise = "(TaskRunner pid=2871) ERROR: reward server returned 503"
    steps = [
        f"(TaskRunner pid=2871) step:{n} - actor/pg_loss:-0.01{n} - critic/score/mean:0.5{n} - timing_s/step:41.20{n}"
        for n in range(1, 6)
    ]
    code, doc, _path = run([noise, *steps])
    assert (code, doc["incidents"]) == (0, []), doc["incidents"]
    assert doc["job"]["last_iteration"] == 5, doc["job"]
    assert doc["training"]["loss"][-1] == -0.015, doc["training"]
    # the same line as the log's last word is the failure
    code, doc, _path = run([*steps, noise])
    assert doc["incidents"], doc["job"]


def test_modded_nanogpts_steps_in_either_time_unit_reach_the_last_one(run: Run) -> None:
    # print0's formats: train_time in ms (2024-25) or seconds (2026's records)
    for unit in ("ms", "s"):
        lines = [
            f"step:{n}/40 train_time:{n * 283 if unit == 'ms' else n * 0.283:.3f}{unit} step_avg:283.67ms"
            for n in range(10, 41, 10)
        ]
        code, doc, _path = run(lines)
        job = doc["job"]
        assert (code, job["outcome"], job["last_iteration"]) == (0, "completed", 40), job


def _keras_epoch(e: int, epochs: int) -> list[str]:
    # tf.keras 2.x verbose=1: the redraws of one epoch on one line, then the finalized bar
    redraws = "".join(
        f"\r{s:3d}/260 [{'=' * (s * 30 // 260)}>{'.' * (29 - s * 30 // 260)}] - ETA: 2:13 - loss: 458.81{s % 10} - cls_loss: 0.1205"
        for s in (1, 2, 3)
    )
    return [
        f"Epoch {e}/{epochs}",
        redraws
        + "\r260/260 [==============================] - 141s 542ms/step - loss: 457.6368 - val_loss: 450.6797",
    ]


def test_keras_steps_are_progress_a_run_outlives_an_error_line_by(run: Run) -> None:
    # a dashboard that failed to start, then ten epochs of Keras's fit loop
    lines = ["Starting training.", "Failed to initialize the experiment dashboard"]
    for e in range(1, 11):
        lines += _keras_epoch(e, 10)
    code, doc, _path = run(lines)
    assert (code, doc["incidents"]) == (0, []), doc["incidents"]
    assert doc["training"]["loss"].count(457.6368) == 10, doc["training"]
    # the same line as the log's last word is the failure
    code, doc, _path = run(lines[:2])
    assert doc["incidents"], doc["job"]
    # Keras 3's bar (escape codes and all) and either version's verbose=2 line are steps too
    for step in (
        "\x1b[1m260/260\x1b[0m \x1b[32m━━━━━━━━━━━━━━━━━━━━\x1b[0m\x1b[37m\x1b[0m \x1b[1m141s\x1b[0m 542ms/step - accuracy: 0.9712 - loss: 0.0951",
        "782/782 - 31s - loss: 1.5342 - accuracy: 0.4421 - 31s/epoch - 40ms/step",
        "782/782 - 31s - 40ms/step - accuracy: 0.4421 - loss: 1.5342",
    ):
        code, doc, _path = run([*lines[:2], "Epoch 1/3", step, "Epoch 2/3", step])
        assert (code, doc["incidents"]) == (0, []), (step, doc["incidents"])


def test_a_keras_fit_whose_last_epoch_ran_to_its_last_step_completed(run: Run) -> None:
    lines = ["Starting training."]
    for e in range(1, 4):
        lines += _keras_epoch(e, 3)
    code, doc, _path = run(lines)
    job = doc["job"]
    assert (code, job["outcome"], doc["incidents"]) == (0, "completed", []), job
    assert "Epoch 3/3" in job["outcome_reason"], job
    # cut inside the last epoch (a step before its last), or right at its start: still going
    cut = lines[-1].rpartition("\r")[0]
    for head in ([*lines[:-1], cut], lines[:-1]):
        code, doc, _path = run(head)
        assert doc["job"]["outcome"] == "truncated", doc["job"]
    # an earlier epoch's end is not the run's
    code, doc, _path = run(["Starting training.", *_keras_epoch(1, 3), *_keras_epoch(2, 3)])
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    # a second fit after the first (a fine-tuning phase) cut at one of its epochs' ends: going on
    again = ["Starting training.", *_keras_epoch(1, 1), *_keras_epoch(1, 3), *_keras_epoch(2, 3)]
    code, doc, _path = run(again)
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    # tf.keras 2.0-2.1's verbose=2 line (no time per step) is a step too
    old = "64/64 - 2s - loss: 0.0879 - mean_absolute_error: 0.2531"
    code, doc, _path = run(["Epoch 1/2", old, "Epoch 2/2", old, "INFO All done!"])
    assert doc["job"]["outcome"] == "completed", doc["job"]


def test_keras_early_stopping_ends_fit_before_its_last_epoch(run: Run) -> None:
    # EarlyStopping.on_train_end: `Epoch {n}: early stopping` (2.x `Epoch %05d: ...`) once fit's
    # loop stopped, 3 of 50 epochs in
    lines = ["Starting training."]
    for e in range(1, 4):
        lines += _keras_epoch(e, 50)
    for said in ("Epoch 3: early stopping", "Epoch 00003: early stopping"):
        restored = "Restoring model weights from the end of the best epoch: 1."
        code, doc, _path = run([*lines, said, restored])
        job = doc["job"]
        assert (code, job["outcome"], doc["incidents"]) == (0, "completed", []), job
    # the same epochs without it: cut while fit went on
    code, doc, _path = run(lines)
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def test_lightning_early_stopping_ends_fit(run: Run) -> None:
    # EarlyStopping._evaluate_stopping_criteria with verbose=True, behind rank_prefixed_message;
    # the steps are a LightningModule's own prints (pytorch/examples' format)
    steps = [
        f"Train Epoch: {e} [{n}/60000 ({n // 600}%)]\tLoss: 0.{e}{n}"
        for e in (1, 2)
        for n in (30000, 60000)
    ]
    stop = "[rank: 0] Monitored metric val_loss did not improve in the last 3 records. Best score: 0.412. Signaling Trainer to stop."
    code, doc, _path = run([*steps, stop])
    job = doc["job"]
    assert (code, job["outcome"], doc["incidents"]) == (0, "completed", []), job
    # steps after it (min_epochs kept the loop going): it went on, and the log was cut
    code, doc, _path = run([*steps, stop, "Train Epoch: 3 [30000/60000 (50%)]\tLoss: 0.3"])
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    # a non-finite metric stops it too, but that is no ending of a healthy run
    nan = "Monitored metric val_loss = nan is not finite. Previous best value was 0.412. Signaling Trainer to stop."
    code, doc, _path = run([*steps, nan])
    assert doc["job"]["outcome"] != "completed", doc["job"]


def test_colbert_s_launcher_joins_its_workers_only_after_each_returned(run: Run) -> None:
    # colbert/infra/launcher.py: `#> Starting...` per process, then (every return value in)
    # `#> Joined...` per process
    start = ["nranks = 2 \t num_gpus = 2 \t device=1", "#> Starting...", "#> Starting..."]
    steps = [f"{i} {6.75 - i / 100:.4f}" for i in range(5)]
    code, doc, _path = run([*start, *steps, "#> Joined...", "#> Joined..."])
    assert (code, doc["job"]["outcome"], doc["incidents"]) == (0, "completed", []), doc["job"]
    # without it the workers may still be running
    code, doc, _path = run([*start, *steps])
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def test_yolox_s_trainer_says_its_loop_ended_even_on_the_way_out_of_an_exception(run: Run) -> None:
    head = "2024-02-11 08:{m:02d}:12.504 | INFO     | yolox.core.trainer:{f} - "
    lines = [
        head.format(m=1, f="after_iter:260") + "epoch: 300/300, iter: 20/20, mem: 3012Mb, "
        "iter_time: 0.412s, data_time: 0.002s, total_loss: 2.1, lr: 1.250e-05, size: 640, ETA: 0:00:00",
        head.format(m=2, f="save_ckpt:318") + "Save weights to ./YOLOX_outputs/yolox_s",
    ]
    done = (
        head.format(m=2, f="after_train:195")
        + "Training of experiment is done and the best AP is 41.37"
    )
    code, doc, _path = run([*lines, done])
    assert (code, doc["job"]["outcome"], doc["incidents"]) == (0, "completed", []), doc["job"]
    # after_train runs in a `finally`: a run that raised says it too, then its traceback
    error = "RuntimeError: CUDA error: an illegal memory access was encountered"
    raised = [
        *lines,
        done,
        "Traceback (most recent call last):",
        '  File "tools/train.py", line 9',
        error,
    ]
    _doc, inc, path = failed_verdict(run, raised)
    assert_root(inc, path, len(raised), error)


def _nanotron_step(i: int, total: int, header: str) -> str:
    # LoggerWriter.add_scalars_from_list's line under nanotron's logger header
    return f"{header} [INFO|DP=0|PP=0|TP=0|ip-26-0-1-7]: iteration: {i} / {total} | consumed_tokens: 634K | time_per_iteration_ms: 258 | tokens_per_sec: 2.48K | global_batch_size: 20 | lm_loss: 9.6{i % 10} | lr: 1e-05 | grad_norm: 1.11"


def test_a_nanotron_run_whose_steps_reach_its_train_steps_completed(run: Run) -> None:
    lines = [_nanotron_step(i, 1000, f"01/17/2024 14:{i - 990:02d}:46") for i in range(991, 1001)]
    code, doc, _path = run(lines)
    assert (code, doc["job"]["outcome"]) == (0, "completed"), doc["job"]
    assert doc["training"]["loss"][-1] == 9.6, doc["training"]
    # the logger's `%m/%d/%Y %H:%M:%S [LEVEL|...]: ` header gives each line its time
    assert (doc["job"]["start"], doc["job"]["end"]) == (
        "2024-01-17T14:01:46",
        "2024-01-17T14:10:46",
    )
    # before its last step, with an error line it went on after: still going, no incident
    noise = (
        "01/17/2024 14:00:01 [ERROR|DP=0|PP=0|TP=0|ip-26-0-1-7]: Failed to upload metrics, retrying"
    )
    code, doc, _path = run([noise, *lines[:5]])
    assert (doc["job"]["outcome"], doc["incidents"]) == ("truncated", []), doc["job"]
    # the 2025+ header (no year) is read too
    code, doc, _path = run([_nanotron_step(i, 20, f"03/02 09:{i:02d}:44") for i in (1, 2)])
    assert doc["job"]["end"] is not None and doc["job"]["end"].endswith("-03-02T09:02:44"), doc[
        "job"
    ]


def test_a_yolo_run_ends_when_its_epoch_loop_says_so(run: Run) -> None:
    # YOLOv5's bar description (epoch from 0, GPU memory, losses, instances, size) under tqdm
    bar = "     {e}/2     3.55G   0.04712   0.05468   0.01728       186       640: 100%|██████████| 235/235 [01:23<00:00,  2.81it/s]"
    noise = "WARNING ⚠️ NMS time limit 0.550s exceeded"
    lines = [noise, "ERROR: could not write results.png", *(bar.format(e=e) for e in range(3))]
    code, doc, _path = run([*lines, "", "3 epochs completed in 0.070 hours."])
    assert (code, doc["job"]["outcome"], doc["incidents"]) == (0, "completed", []), doc["job"]
    # without it the loop may still be running
    code, doc, _path = run(lines)
    assert doc["job"]["outcome"] != "completed", doc["job"]


def test_mxnets_epoch_lines_are_progress_with_the_time_fit_states(run: Run) -> None:
    # Speedometer's and Module.fit's formats under logging.basicConfig's `INFO:root:`
    speed = "INFO:root:Epoch[{e}] Batch [{a}-{b}]\tSpeed: 1808.63 samples/sec\taccuracy=0.41{b}"
    lines = ["ERROR:root:failed to open the experiment dashboard"]
    for e in range(3):
        lines += [speed.format(e=e, a=a, b=a + 100) for a in (0, 100)]
        lines += [
            f"INFO:root:Epoch[{e}] Train-accuracy=0.41{e}",
            f"INFO:root:Epoch[{e}] Time cost=41{e}.5",
        ]
    code, doc, _path = run(lines)
    assert (code, doc["incidents"]) == (0, []), doc["incidents"]
    assert doc["training"]["step_s"] == [410.5, 411.5, 412.5], doc["training"]
    # the same line as the log's last word is the failure
    code, doc, _path = run([*lines[1:], lines[0]])
    assert doc["incidents"], doc["job"]


def test_a_tensorflow_estimator_run_ends_when_train_returns(run: Run) -> None:
    # LoggingTensorHook's `loss = v, step = n` (timed from its second line on) and Estimator.train's
    # last line, under tf_logging's `INFO:tensorflow:` and absl's header
    steps = [
        "INFO:tensorflow:loss = 2.3025851, step = 0",
        *(f"INFO:tensorflow:loss = 0.{90 - i}, step = {i * 100} (4.2{i} sec)" for i in range(1, 6)),
    ]
    noise = "ERROR:tensorflow:Couldn't match files for checkpoint gs://bucket/run/model.ckpt-0"
    code, doc, _path = run([noise, *steps, "INFO:tensorflow:Loss for final step: 0.85."])
    assert (code, doc["job"]["outcome"], doc["incidents"]) == (0, "completed", []), doc["job"]
    assert doc["job"]["last_iteration"] == 500, doc["job"]
    # a train/evaluate loop's round: steps after it, and the log ends while they go on
    absl = "I0411 11:40:02.905113 139923 estimator.py:371] Loss for final step: 0.85."
    more = [
        f"I0411 11:4{i}:00.101374 139923 basic_session_run_hooks.py:260] loss = 0.8{i}, step = {600 + i * 100} (4.3 sec)"
        for i in range(3)
    ]
    code, doc, _path = run([*steps, absl, *more])
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def _dinov2_step(i: int, total: int) -> str:
    return f"I20240509 15:{44 + i // 60:02d}:{i % 60:02d} 746011 dinov2 helpers.py:102] Training  [{i:3d}/{total}]  eta: 0:00:37  lr: 0.0004 (0.0005)  total_loss: 11.{i:04d} (11.5120)  time: 0.600001  data: 0.010120  max mem: 28188"


def test_dinov2s_whole_run_loop_says_it_ran_through_its_iterations(run: Run) -> None:
    """DINOv2 logs its glog-shaped header from Python (no fraction, the logger's name), its
    steps 0-based to n-1, and `Training Total time` once the loop ran through all of them."""
    steps = [_dinov2_step(i, 100) for i in (0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 99)]
    done = "I20240509 15:45:42 746011 dinov2 helpers.py:130] Training Total time: 0:01:42 (1.020709 s / it)"
    code, doc, _path = run([*steps, done])
    assert code == 0 and doc["job"]["outcome"] == "completed", doc["job"]
    assert doc["job"]["start"] == "2024-05-09T15:44:00", doc["job"]
    assert (doc["job"]["last_iteration"], doc["job"]["train_iters"]) == (99, 100), doc["job"]
    assert doc["training"]["loss"][-1] == 11.0099, doc["training"]
    code, doc, _path = run(steps)
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def _nxd_step(i: int) -> str:
    return f"step {i} step_time 285.{i}1s throughput 2.{i}9 seq/s loss 1.6{i}2 grad norm 10.{i}"


def test_neuronx_distributed_steps_are_progress_and_its_last_word_ends_the_run(run: Run) -> None:
    """NxD's Llama example: its step lines are what a run outlives an error line by, and its
    `Training finished successfully` ends it."""
    noise = "cluster agent: node ip-10-1-16-50 failed its health check, replaced"
    code, doc, _path = run([_nxd_step(1), noise, *(_nxd_step(i) for i in range(2, 6))])
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
    assert doc["job"]["last_iteration"] == 5, doc["job"]
    code, doc, _path = run([*(_nxd_step(i) for i in range(1, 4)), "Training finished successfully"])
    assert code == 0 and doc["job"]["outcome"] == "completed", doc["job"]


def _paddleocr_step(epoch: int, step: int) -> str:
    return (
        f"[2023/03/14 09:{step // 10:02d}:00] ppocr INFO: epoch: [{epoch}/500], global_step: {step},"
        f" lr: 0.001000, loss: {12 - step / 100:.6f}, avg_reader_cost: 0.35422 s,"
        " avg_batch_cost: 0.82110 s, avg_samples: 8.0, ips: 9.74304 samples/s, eta: 9:21:07"
    )


def test_paddleocr_steps_are_progress_a_run_outlives_an_error_line_by(run: Run) -> None:
    noise = "[gpu-3] read file error: /data/rec/img_0042.jpg is empty, skipped"
    lines = [_paddleocr_step(1, 10), noise, *(_paddleocr_step(1, s) for s in range(20, 70, 10))]
    code, doc, _path = run(lines)
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
    assert doc["job"]["last_iteration"] == 60, doc["job"]


def _dll_step(epoch: int, it: int) -> str:
    return (
        f"DLL 2021-06-26 19:{epoch:02d}:{it:02d}.118233 - Epoch: {epoch} Iteration: {it}"
        f"  train.loss : 6.{it:02d}  train.total_ips : 5989.05 img/s"
    )


def test_dllogger_steps_and_summary_of_an_nvidia_example(run: Run) -> None:
    """DLLogger's per-epoch iterations are progress a run outlives an error line by (the count
    starting again at each epoch is no restart), and its Summary ends the run."""
    feeder = [
        "Traceback (most recent call last):",
        '  File "/opt/conda/lib/python3.8/multiprocessing/queues.py", line 245, in _feed',
        "BrokenPipeError: [Errno 32] Broken pipe",
    ]
    epochs = [[_dll_step(e, i) for i in range(1, 6)] for e in (0, 1)]
    summary = (
        "DLL 2021-06-26 19:09:00.000001 - Summary: train.loss : 6.01  train.total_ips : 5600 img/s"
    )
    code, doc, _path = run([*epochs[0], *feeder, *epochs[1], summary])
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
    assert doc["job"]["outcome"] == "completed", doc["job"]
    # without the summary the log stops mid-run
    code, doc, _path = run([*epochs[0], *feeder, *epochs[1]])
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def test_paddleocrs_stop_handler_says_the_run_was_stopped(run: Run) -> None:
    steps = [_paddleocr_step(1, s) for s in range(10, 50, 10)]
    stop = "main proc 40112 exit, kill process group 40098"
    _code, doc, _path = run([*steps, stop])
    assert doc["job"]["outcome"] == "cancelled", doc["job"]
    # after another failure it is that failure's consequence
    crash = "ValueError: invalid character in label of sample 17"
    assert failed_verdict(run, [*steps, crash, stop])[1]["category"] == "python_exception"


def test_paddlenlps_trainer_says_training_completed(run: Run) -> None:
    head = "[2023-11-10 10:23:37,582] [    INFO] - "
    lines = [
        f"{head}***** Running training *****",
        f"{head}  Num examples = 852",
        "",
        "Training completed. ",
        "",
        f"{head}***** Running Evaluation *****",
    ]
    code, doc, _path = run(lines)
    assert code == 0 and doc["job"]["outcome"] == "completed", doc["job"]


def test_a_scripts_report_of_its_last_epoch_ends_the_run(run: Run) -> None:
    # a script's one report an epoch, and the PyTorch tutorials' `Epoch [e/E], Step [s/S], Loss`
    for report, steps, mid_steps in (
        ("Epoch {e}/5 - Loss: 0.{e}1, Acc: 0.9{e}, Time: 3.1s", ("",), ()),
        ("Epoch [{e}/5], Step [{s}/600], Loss: 0.{e}1", ("300", "600"), ("500",)),
    ):
        lines = [report.format(e=e, s=s) for e in range(1, 6) for s in steps]
        _code, doc, _path = run(lines)
        assert doc["job"]["outcome"] == "completed", (report, doc["job"])
        # cut before the last epoch's end (or inside it): the log ends while it trains
        cuts = [lines[:-1], *([*lines[:-1], report.format(e=5, s=s)] for s in mid_steps)]
        for cut in cuts:
            _code, doc, _path = run(cut)
            assert doc["job"]["outcome"] == "truncated", (cut[-1], doc["job"])
    # a failure after the last epoch's report is still how the run ended
    lines = [f"Epoch {e}/3 - Loss: 0.{e}1" for e in range(1, 4)]
    _doc, inc, _path = failed_verdict(
        run,
        [
            *lines,
            "Traceback (most recent call last):",
            "OSError: [Errno 28] No space left on device",
        ],
    )
    assert inc["category"] == "io_error", inc


def test_pyslowfasts_training_done_line_ends_its_run(run: Run) -> None:
    """PySlowFast's train_net.py logs `training done: ...` once the epochs and the final
    evaluation returned; the same log cut before it says nothing of its end."""
    head = "[06/12 09:{m:02d}:02][INFO] "
    lines = [
        head.format(m=40) + "train_net.py:  530: Start epoch: 80",
        head.format(m=41)
        + 'logging.py:   99: json_stats: {"_type": "val_epoch", "epoch": "80/80", "top1_err": 22.98}',
    ]
    done = (
        head.format(m=41)
        + "train_net.py:  756: training done: _p34.57_f65.71 _t12.40_m9.87 _a77.02 Top5 Acc: 93.18 MEM: 9.87 f: 65.7104"
    )
    code, doc, _path = run([*lines, done])
    assert code == 0 and doc["job"]["outcome"] == "completed", doc["job"]
    _code, doc, _path = run(lines)
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def test_an_algoperf_run_whose_runner_scored_it_completed(run: Run) -> None:
    """AlgoPerf's submission runner: CLU's LoggingWriter step lines (clu.toml), git refusing a
    checkout another user owns while the runner records its hash (git.toml: it goes on), and
    `Final <workload> score` once every trial trained (algoperf.toml)."""
    head = "I0611 10:{m:02d}:03.123456 140211 "
    lines = [
        head.format(m=0) + "submission_runner.py:287] Initializing checkpoint and logger.",
        "fatal: detected dubious ownership in repository at '/opt/algoperf'",
        "To add an exception for this directory, call:",
        "",
        "\tgit config --global --add safe.directory /opt/algoperf",
        head.format(m=0)
        + "logger_utils.py:220] Unable to record git information. Continuing without it.",
    ]
    lines += [
        head.format(m=i)
        + f"logging_writer.py:48] [{i * 100}] global_step={i * 100}, grad_norm=0.41, loss=0.{90 - i}"
        for i in range(1, 9)
    ]
    code, doc, _path = run(lines)
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
    assert (doc["job"]["outcome"], doc["job"]["last_iteration"]) == ("truncated", 800), doc["job"]
    lines.append(head.format(m=9) + "submission_runner.py:853] Final ogbg score: 1976.387057542801")
    code, doc, _path = run(lines)
    assert doc["job"]["outcome"] == "completed", doc["job"]
    # the git block alone, before any step: nothing failed
    code, doc, _path = run(lines[:6])
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
