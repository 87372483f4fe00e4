"""The optional policy trainer: fine-tune the agent model on the trajectories a run collected.

Two modes over the same token-exact samples (:mod:`.samples`): rejection-sampling fine-tuning on
successful trajectories (:mod:`.rft`) and a GRPO-style policy gradient over groups of rollouts per
task (:mod:`.grpo`). Checkpoints (:mod:`.checkpoint`) are Hugging Face folders the local
provider's torch backend serves as ``local/torch:<dir>``.

Needs the ``train`` extra (torch, transformers, peft); every import of torch happens inside a
function, so the rest of harnessevolve works without it. Entry points: :mod:`.session`.
"""
