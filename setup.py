"""Packaging for torchrl_agentic."""

from setuptools import find_packages, setup

setup(
    name="torchrl_agentic",
    version="0.1.0",
    description="Fast, safe, exact tool execution for LLM reinforcement learning with TorchRL",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="MIT",
    python_requires=">=3.10",
    packages=find_packages(include=["torchrl_agentic", "torchrl_agentic.*"]),
    package_data={"torchrl_agentic": ["py.typed"]},
    install_requires=[
        "torch>=2.5",
        "torchrl>=0.14.1,<0.15",
        "tensordict",
        "transformers",
        "jsonschema>=4",
    ],
    extras_require={
        "test": [
            "pytest>=8",
            "pytest-benchmark>=4",
            "pytest-timeout",
            "hypothesis>=6",
            "ruff",
            "mypy",
        ],
    },
)
