"""Lets a module run as a plain script in tests: our module_utils join ansible.module_utils.

Ansible itself ships module_utils inside the module payload; running library/*.py directly (as
the tests do, to see exactly what a node would print) needs this path hook instead.
"""
import os

try:
    import ansible.module_utils
    extra = os.environ.get("ANSIBLE_MODULE_UTILS")
    if extra and extra not in ansible.module_utils.__path__:
        ansible.module_utils.__path__.append(extra)
except ImportError:
    pass
