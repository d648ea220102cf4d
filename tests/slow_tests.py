"""The tests `make test-fast` leaves out: tests/conftest.py marks these `slow` (a test may also carry the marker
itself). Each took about 10 s or more (setup included) in a `--durations` report of this 2-core machine under load;
what is left runs in a few minutes for the inner loop (DEVELOPERS.md, "Tests"). A file is listed whole where its
cost is a fixture its tests share (a Ray cluster, an MLflow server, a tiny adapt, a family's tokenizer), since
selecting one of its fast tests would pay that fixture anyway. Add a test here when `make test` lists it among the
slowest; `make test` (and CI) runs everything either way."""

from __future__ import annotations

SLOW_FILES = {
    "tests/benchmarks/test_recovery_gpu_cpu.py",
    "tests/dashboard/test_app.py",
    "tests/dashboard/test_browser.py",
    "tests/dashboard/test_leaderboard_view.py",
    "tests/dashboard/test_multilingual_view.py",
    "tests/evaluation/test_vllm_backend.py",
    "tests/evaluation/test_vllm_harness.py",
    "tests/evaluation/test_vllm_servers_per_model.py",
    "tests/export/test_export_registered.py",
    "tests/export/test_gguf_export.py",
    "tests/export/test_gguf_families.py",
    "tests/families/test_family_fertility.py",
    "tests/families/test_family_initializers.py",
    "tests/families/test_family_tokenizers.py",
    "tests/families/test_twin_adapt.py",
    "tests/families/test_twins.py",
    "tests/infra/test_mlflow_server.py",
    "tests/multilingual/test_multilingual_config.py",
    "tests/pipelines/test_adapt_console.py",
    "tests/pipelines/test_adapt_e2e.py",
    "tests/pipelines/test_bad_input.py",
    "tests/pipelines/test_bad_input_commands.py",
    "tests/pipelines/test_demo_configs.py",
    "tests/pipelines/test_leaderboard.py",
    "tests/pipelines/test_mlproject.py",
    "tests/platform/test_ray_jobs_live.py",
    "tests/platform/test_storage_s3.py",
    "tests/registry/test_logged_model.py",
    "tests/registry/test_recorded_gates.py",
    "tests/registry/test_registry_auth.py",
    "tests/serving/test_serve.py",
    "tests/sweeps/test_sweep.py",
    "tests/sweeps/test_sweep_adapt.py",
    "tests/sweeps/test_sweep_modes.py",
    "tests/tokenizers/test_expand.py",
    "tests/tokenizers/test_expand_numbers.py",
    "tests/training/test_multinode_process.py",
    "tests/training/test_objectives.py",
    "tests/training/test_quiet_console.py",
    "tests/training/test_ray_lapt.py",
    "tests/training/test_ray_lapt_distill.py",
    "tests/trim/test_trim.py",
}

# file::test, whatever its parameters
SLOW_TESTS = {
    "tests/bad_input/test_generated_model_folders.py::test_the_clean_sharded_checkpoint_passes",
    "tests/benchmarks/test_recovery_benchmark.py::test_the_arms_are_read_back_as_the_product_logged_them",
    "tests/evaluation/test_cluster_suite.py::test_cluster_suite_tasks_resolve_in_lm_eval",
    "tests/evaluation/test_evaluate_pipeline.py::test_evaluate_registered_model_logs_every_score",
    "tests/evaluation/test_gate_items.py::test_per_document_bits_sum_to_the_corpus_bits_per_byte",
    "tests/evaluation/test_offline_suite.py::test_lm_eval_scores_the_tasks_in_memory",
    "tests/families/test_family_model_fit.py::test_expansion_of_a_padded_vocabulary",
    "tests/families/test_family_model_fit.py::test_rows_smaller_than_the_target_ids_are_refused",
    "tests/families/test_family_tokenizer_cli.py::test_train_like_and_expand_a_family_folder",
    "tests/initializers/test_bounded_memory.py::test_streamed_surgery_writes_the_same_bytes_through_a_small_budget",
    "tests/initializers/test_determinism.py::test_every_method_writes_the_same_bytes_in_another_process",
    "tests/initializers/test_omp.py::test_omp_recovers_a_planted_sparse_combination",
    "tests/initializers/test_planted.py::test_sava_sgd_variant_runs_latentis_and_approaches_the_map",
    "tests/initializers/test_surgery.py::test_untied_head_rows_come_from_the_head",
    "tests/initializers/test_wechsel.py::test_planted_rotation_sends_every_token_to_its_own_word",
    "tests/languages/test_language_adapt.py::test_language_matrix_on_a_tiny_model",
    "tests/languages/test_language_adapt.py::test_tiny_adapt_for_each_script",
    "tests/multilingual/test_adapt_languages.py::test_adapt_expands_for_two_languages_and_reports_each",
    "tests/multilingual/test_adapt_languages.py::test_replacement_trains_one_tokenizer_on_the_balanced_mix",
    "tests/pipelines/test_adapt_merge.py::test_adapt_merges_into_the_chat_model_and_registers_the_merged_checkpoint",
    "tests/pipelines/test_bad_input_interrupts.py::test_sigint_to_a_real_adapt_process",
    "tests/pipelines/test_recipe.py::test_a_method_scored_in_memory_scores_as_its_checkpoint_read_back",
    "tests/registry/test_serve_check.py::test_registration_refuses_a_model_that_would_not_serve",
    "tests/sweeps/test_artefact_cache.py::test_adapt_reusing_cached_artefacts_gives_the_bytes_of_computing_them",
    "tests/tokenizers/test_chat_rows.py::test_adapted_chat_model_keeps_template_and_special_rows",
    "tests/tokenizers/test_cli.py::test_train_overlap_expand_fertility",
    "tests/tokenizers/test_expand_defaults.py::test_expand_protects_the_embedded_word_list_unless_told_not_to",
    "tests/tokenizers/test_train.py::test_like_gemma_keeps_special_ids",
    "tests/training/test_ddp_accumulation.py::test_ddp_reduces_gradients_once_per_accumulation_window",
    "tests/training/test_deepspeed_loop.py::test_deepspeed_follows_the_plain_curve_and_saves_full_weights",
    "tests/training/test_deepspeed_loop.py::test_two_stage_rebuilds_the_deepspeed_engine_with_the_new_trainable_set",
    "tests/training/test_head_fit.py::test_the_held_out_check_refuses_rows_that_only_fit_their_own_positions",
    "tests/training/test_lapt_platform.py::test_mlflow_logger_continues_a_run_without_repeating_steps",
}


def is_slow(nodeid: str) -> bool:
    """Whether the test with this pytest node id (``tests/x/test_y.py::test_z[param]``) is listed above."""
    path, _, name = nodeid.partition("::")
    return path in SLOW_FILES or f"{path}::{name.split('[')[0]}" in SLOW_TESTS


# The files that take longest in a fresh clone's `make test` (summed over each file's tests, two workers), in the
# order of the fastest run on record. tests/conftest.py collects them before every other file and `make test`
# keeps that order (--no-loadscope-reorder), so the two workers (a whole file each, --dist loadfile) start them first
# and end on short files; xdist's own order (most tests first) left the one-test multi-node file running alone for
# the last minutes. Whole runs differ by about 10% here: 1,634 s at 46bf800 in this order, 1,814 s at 8c26da1 strictly
# longest first, 1,822 s at d9b9444 in this order again (docs/benchmarks/test-suite.md). The order changes no result.
LONGEST_FILES = (
    "tests/families/test_family_initializers.py",  # 403 s at 46bf800; 457 s at f4086e6 (every method at hidden 16)
    "tests/export/test_gguf_families.py",  # 248 s
    "tests/families/test_twin_adapt.py",  # 249 s
    "tests/pipelines/test_demo_configs.py",  # 327 s
    "tests/training/test_ray_lapt.py",  # 181 s
    "tests/training/test_multinode_process.py",  # 206 s
    "tests/sweeps/test_sweep.py",  # 120 s
    "tests/pipelines/test_mlproject.py",  # 101 s
    "tests/platform/test_storage_s3.py",  # 122 s
    "tests/multilingual/test_multilingual_config.py",  # 76 s
    "tests/sweeps/test_sweep_adapt.py",  # 79 s
    "tests/training/test_ray_lapt_distill.py",  # 54 s
)


def collection_rank(nodeid: str) -> int:
    """Where a test's file comes in the collection: LONGEST_FILES in their order, then every other file."""
    path = nodeid.split("::", 1)[0]
    return LONGEST_FILES.index(path) if path in LONGEST_FILES else len(LONGEST_FILES)
