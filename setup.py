"""Build hook for the optional C accelerator of the nccl-tests parser (issue 17); metadata is in pyproject.toml.

``optional=True``: where no C compiler (or no Python headers) is found, the build says so and installs the
package without it, and rdmaforge.nccl_tests uses its pure-Python code, whose output is identical.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "rdmaforge.nccl_tests._fastrows",
            ["rdmaforge/nccl_tests/_fastrows.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
