"""Model registry: the packaged SmolLM2 answers offline; the tiny Llama trains; LoRA adapters load back."""
import torch
from toolpaper.models import MODELS, chat, ensure_model, load_model


def test_smollm2_offline_chat():
    model, tok = load_model("smollm2-135m-instruct", device="cpu")
    assert next(model.parameters()).dtype == torch.float32
    assert tok.chat_template and "<|im_start|>" in tok.chat_template
    reply = chat(
        model,
        tok,
        [{"role": "user", "content": "What is the capital of France? Answer in one word."}],
        max_new_tokens=10,
    )
    assert "paris" in reply.lower(), reply


def test_tiny_llama_training_step_and_adapter_roundtrip(tmp_path):
    from peft import LoraConfig, get_peft_model
    model, tok = load_model("tiny-random-llama", device="cpu", trainable=True)
    assert model.config.num_hidden_layers == 2
    peft_model = get_peft_model(
        model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    )
    batch = tok(["Action: getWeather", "Next: caller."], return_tensors="pt", padding=True)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    opt = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=5e-2)
    first = peft_model(**batch, labels=labels).loss
    for _ in range(5):
        loss = peft_model(**batch, labels=labels).loss
        loss.backward(); opt.step(); opt.zero_grad()
    assert loss.item() < first.item()
    peft_model.save_pretrained(tmp_path / "adapter")
    reloaded, _ = load_model("tiny-random-llama", adapter=str(tmp_path / "adapter"), device="cpu")
    with torch.no_grad():
        assert torch.allclose(reloaded(**batch).logits, peft_model(**batch).logits, atol=1e-5)


def test_unregistered_names_pass_through(tmp_path):
    assert ensure_model("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert ensure_model(str(tmp_path)) == str(tmp_path)
    assert set(MODELS) >= {"smollm2-135m-instruct", "tiny-random-llama", "all-minilm-l6-v2"}
