"""The pieces of tools/train_demo_model.py: corpus, tokenizer, model, training, evaluation, exports.

Each module does one step of building the bundled demo MTP model; the script runs them in order.
They need the `train` extra (torch, transformers, tokenizers), which the app itself does not.
"""
