"""Trainers: TRL GRPO (DAPO options) and rejection fine-tuning."""
