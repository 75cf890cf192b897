"""pysiglip: SigLIP's text and vision towers in PyTorch with Hugging Face names (see siglip.py)."""
