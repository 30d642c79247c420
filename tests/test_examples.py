"""Every public function and class of `toolpaper` is shown in an example or test in the notebook that defines it.

A name counts as shown when it appears in a code cell of its notebook that is not exported (an example or a test),
so a reader of the notebook sees it used. `NOT_YET_SHOWN` lists the names still without one: the test fails for a
new public name without an example and for a listed name that has gained one (take it off the list), so the list
only shrinks.
"""
import importlib
import inspect
import re
from pathlib import Path

import nbformat

NBS = Path(__file__).resolve().parents[1] / "nbs"

# Public functions and classes not yet shown in their notebook (issue 20 is working through them).
NOT_YET_SHOWN: dict[str, set[str]] = {
    "00_io": {'atomic_write_bytes'},
    "00_schema": {'Record', 'RefError', 'ToolExample', 'check_turn_order', 'split_call_args'},
    "01_data": {
        'ChainError', 'DatasetSpec', 'DeerToolRaw', 'DprRecord', 'FinetuneRecord', 'MathProblem', 'RemoteFile',
        'SealCallRaw', 'SealInstanceRaw', 'SealParamRaw', 'SealToolRaw', 'UmiRoleExample', 'deer_tool', 'ensure',
        'fetch', 'is_sample', 'load_deer_tools', 'parse_chain', 'parse_pool', 'read_deer_baseline', 'read_deer_chains',
        'read_deer_tools', 'read_seal_dpr', 'read_seal_fields', 'read_seal_finetune', 'read_seal_tools',
        'read_umi_role_file', 'read_umi_steps', 'seal_tool', 'split_chain', 'split_path', 'umi_tool', 'umi_turns',
        'validate'
    },
    "02_models": {
        'ModelSpec', 'convert_gguf', 'default_device', 'default_dtype', 'ensure_model', 'load_tokenizer',
        'make_tiny_llama', 'models_cache'
    },
    "03_stats": {'field_table', 'seal_split_stats'},
    "04_parse": {'DeerOutput', 'SealOutput', 'balanced_spans', 'fenced_blocks', 'load_literal', 'parse_caller'},
    "05_metrics": {
        'ScoreResult', 'SealCounts', 'baseline_action', 'deer_scores', 'match_calls', 'resolve_references',
        'seal_scores', 'seal_summary'
    },
    "06_audit": {'score_released_echo'},
    "07_retrieval": {
        'CandidateList', 'DenseRetriever', 'Retriever', 'check_queries', 'dense_text', 'dpr_key', 'gold_sets',
        'kind_table', 'train_dpr_retriever'
    },
    "08_sampling": {
        'ChainPhrases', 'DecisionData', 'ToolClusters', 'chain_phrases', 'embed_tools', 'released_phrases',
        'render_pool', 'to_messages'
    },
    "09_prompts": {
        'PromptExample', 'check_style', 'deer_plain_prompt', 'render_plain', 'seal_template', 'seal_tool_dict',
        'split_chain_spans'
    },
    "10_train": {'SpanCollator', 'SpanTrainer', 'build_dataset', 'training_args'},
    "11_engine": {'EngineStats', 'Output', 'causal_lm', 'engine_support', 'make_engine'},
    "12_client": {'CacheMiss', 'LLMError', 'Usage'},
    "13_generate": {
        'GenResult', 'StageYield', 'name_duplicate', 'prompt_backfill', 'prompt_combo', 'prompt_deer_check',
        'prompt_deer_examples', 'prompt_deer_filter', 'prompt_fields', 'prompt_multi', 'prompt_origin', 'prompt_query',
        'prompt_single', 'prompt_subfields', 'prompt_tools', 'rule_value', 'stage_prompt'
    },
    "14_sealtools": {
        'SealRun', 'gold_examples', 'make_retrievers', 'plot_param_by_kind', 'plot_taxonomy', 'released_examples',
        'released_gold_coverage', 'setting_label', 'train_examples'
    },
    "15_deer": {
        'DeerAblation', 'DeerRun', 'compact_chain', 'plot_span_losses', 'plot_strategies', 'pool_text', 'table4'
    },
    "16_tools": {'Execution', 'Observation', 'response_types', 'simulated_value', 'tool_from_function'},
    "17_trajectories": {
        'TrajectoryError', 'backbone_messages', 'caller_messages', 'history_text', 'planner_messages',
        'released_planner_text', 'summarizer_messages', 'to_umi_records', 'tool_doc', 'umi_history', 'umi_tool_dict'
    },
    "18_agent": {'AgentRun', 'split_backbone'},
    "19_umi": {'UmiRun', 'plot_umi_scaling', 'plot_umi_span_losses', 'umi_group', 'umi_scaling'},
    "20_bench": {
        'BenchError', 'DeerPredictor', 'SealPredictor', 'UmiPredictor', 'bench_rows', 'paper_quotes',
        'read_predictions', 'score_run'
    },
    "21_serve": {'Batcher', 'load_clients', 'serve'},
    "22_sandbox": {'ExecResult'},
    "23_math": {'MathRun', 'normalize_math', 'pal_messages', 'step_code'},
    "90_report": {'Experiment', 'default_out', 'package_versions', 'reproduce', 'write_index'},
    "99_cli": {
        'bench_client', 'bench_table_cli', 'build_parser', 'data_check', 'data_export', 'data_stats', 'export_tools',
        'read_predictions_file', 'run_bench_cli', 'run_eval'
    },
}


def _export_dirs(src: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^#\|\s*(\w+)", src, re.M)}


def notebook_names(nb_path: Path) -> tuple[str | None, set[str], str]:
    "The module a notebook exports to, its public functions and classes, and the text of its example/test cells."
    nb = nbformat.read(nb_path, as_version=4)
    module, shown = None, []
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        m = re.search(r"^#\|\s*default_exp\s+(\S+)", c.source, re.M)
        if m:
            module = m.group(1)
        elif not _export_dirs(c.source) & {"export", "exports", "exporti"}:
            shown.append(c.source)
    if module is None:
        return None, set(), ""
    mod = importlib.import_module(f"toolpaper.{module}")
    names = {
        n for n in getattr(mod, "__all__", [])
        if not n.startswith("_") and (inspect.isfunction(obj := getattr(mod, n)) or inspect.isclass(obj))
        and getattr(obj, "__module__", None) == mod.__name__
    }
    return module, names, "\n".join(shown)


def missing_examples() -> dict[str, set[str]]:
    "{notebook stem: public names that no example or test cell of that notebook mentions}."
    out = {}
    for p in sorted(NBS.glob("*.ipynb")):
        module, names, shown = notebook_names(p)
        miss = {n for n in names if not re.search(rf"(?<![\w]){re.escape(n)}\b", shown)}
        if miss:
            out[p.stem] = miss
    return out


def test_every_public_name_has_an_example():
    miss = missing_examples()
    new = {nb: sorted(names - NOT_YET_SHOWN.get(nb, set())) for nb, names in miss.items()}
    new = {nb: names for nb, names in new.items() if names}
    assert not new, f"public names without an example or test in their notebook: {new}"
    stale = {nb: sorted(names - miss.get(nb, set())) for nb, names in NOT_YET_SHOWN.items()}
    stale = {nb: names for nb, names in stale.items() if names}
    assert not stale, f"these names now have an example: take them off NOT_YET_SHOWN: {stale}"


def test_counter_sees_examples(tmp_path):
    "The counter itself: an exported name used in a test cell counts as shown, one only defined does not."
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("#| default_exp io"),
                nbformat.v4.new_code_cell("#| export\ndef sha256(p): ..."),
                nbformat.v4.new_code_cell("sha256('x')  # an example")]
    p = tmp_path / "00_io.ipynb"
    nbformat.write(nb, p)
    module, names, shown = notebook_names(p)
    assert module == "io" and "sha256" in names and "read_jsonl" in names
    assert re.search(r"(?<![\w])sha256\b", shown) and "read_jsonl" not in shown
