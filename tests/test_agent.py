"""alpha-UMi pieces beyond the notebook examples: full fine-tuning copies, the file round trip, the simulator's
determinism."""
from toolpaper.agent import GLPFTConfig, make_agent, train_methods, static_predictions, UmiAgent
from toolpaper.data import load, read_umi_steps
from toolpaper.tools import ToolEnv
from toolpaper.trajectories import TrajConfig, build_corpus, save_trajectories, split_by_instance


def corpus(n=6):
    return build_corpus(
        load("seal-tools:dev", "sample")[:n],
        load("seal-tools:tools", "sample"),
        TrajConfig(give_up_frac=0.2, recovery_frac=0.2),
    )


def test_full_fine_tuning_copies_are_full_models(tmp_path):
    tr = corpus(4)
    trained = train_methods(
        "tiny-random-llama", tr, tmp_path, GLPFTConfig(lora=False, max_steps=1, batch_size=2), methods=("alpha_umi",)
    )
    folders = trained["alpha_umi"]["models"]
    assert len(set(folders.values())) == 3
    for f in folders.values():  # each role is a full model folder started from the stage-1 folder, not an adapter
        assert (tmp_path / f.split("/")[-1] / "config.json").exists() and not (
            tmp_path / f.split("/")[-1] / "adapter_config.json"
        ).exists()
    agent = make_agent("alpha_umi", trained, "tiny-random-llama", max_new_tokens=(4, 4, 4))
    assert isinstance(agent, UmiAgent) and agent.planner is not agent.caller
    preds = static_predictions(agent, tr[:1])
    assert set(preds[0]) == set(range(sum(t.role == "planner" for t in tr[0].turns)))


def test_trajectory_files_round_trip_and_split(tmp_path):
    tr = corpus()
    save_trajectories(tmp_path / "t.json", tr)
    back = read_umi_steps(tmp_path / "t.json")
    assert [t.id for t in back] == [t.id for t in tr]
    a, b = split_by_instance(tr, 0.5, seed=3)
    assert len(a) + len(b) == len(tr) and not ({t.id.split(":")[0] for t in a} & {t.id.split(":")[0] for t in b})


def test_simulator_is_deterministic_across_environments():
    tools = load("seal-tools:tools", "sample")
    t = next(x for x in tools if x.required)
    args = {p.name: ("x" if p.type == "str" else 1) for p in t.parameters if p.required}
    assert ToolEnv(tools, seed=1).call(t.name, args).content == ToolEnv(tools, seed=1).call(t.name, args).content
    assert ToolEnv(tools, seed=1).call(t.name, args).content != ToolEnv(tools, seed=2).call(t.name, args).content


def test_cpu_profile_meets_the_claims_sizes(released):
    "The cpu alpha-UMi run the claims ledger reads: >= 200 scored held-out steps, >= 80 training trajectories (10x)."
    from toolpaper import umi as UM
    cfg = UM.UmiExpConfig.for_profile("cpu")
    c = UM._umi_corpus(load("seal-tools:tools", released), load("seal-tools:dev", released),
                       load("seal-tools:test_in_domain", released), cfg)
    assert c["main_n"] >= 80 and len(c["subsets"][c["main_n"]]) == c["main_n"]
    from toolpaper.metrics import umi_gold_steps
    assert sum(len(umi_gold_steps(t)) for t in c["test"]) >= 200
    assert cfg.realtime_n <= len(c["test"])
