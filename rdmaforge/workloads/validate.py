"""Validation of the rendered Kubernetes objects against their schemas and API types.

* Core kinds (apps/v1 Deployment, batch/v1 Job): ``kubernetes-validate``, strict schemas (unknown fields
  are errors) of Kubernetes KUBERNETES_VERSION.
* training-operator's kubeflow.org/v1 PyTorchJob and MPIJob: the typed models of the Kubeflow training SDK
  (``kubeflow-training``): every field must be one the model declares, of the declared type, and every
  required field present (the models' own client-side checks); plus the rules training-operator applies.
* mpi-operator's kubeflow.org/v2beta1 MPIJob: the SDK has no model of it, so its CRD schema, restated in
  ``mpijob_schema`` with the sources recorded there.
* Every pod template of a Kubeflow job also passes the strict Kubernetes schema of ``PodTemplateSpec``.

Both packages are dependencies of rdmaforge (pyproject.toml); they are imported only when validation runs, so
rendering works without them. Every problem is one line: ``kind/name: field.path: what is wrong``.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Callable, Mapping
from typing import Any

from rdmaforge.errors import install_hint
from rdmaforge.workloads import k8s, mpijob_schema

#: The Kubernetes release whose schemas the core kinds and pod templates are checked against.
KUBERNETES_VERSION = "1.33"


class ValidatorUnavailable(RuntimeError):
    """A validation package is not installed."""


def _require(module: str, package: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ValidatorUnavailable(
            f"validation needs the Python package {package}: {install_hint(package)}: {exc}"
        ) from exc


def versions() -> dict[str, str]:
    """What validation runs against, for reports."""
    found = {"kubernetes-schema": KUBERNETES_VERSION}
    for package in ("kubernetes-validate", "kubeflow-training"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "not installed"
    source = mpijob_schema.SOURCES[0]
    found["mpijob-v2beta1-crd"] = f"{source['repository']}@{source['commit'][:12]}:{source['path']}"
    return found


def _name(document: Mapping[str, Any]) -> str:
    metadata = document.get("metadata") if isinstance(document.get("metadata"), Mapping) else {}
    return f"{document.get('kind', '?')}/{(metadata or {}).get('name', '?')}"


def _path(parts: Any) -> str:
    return ".".join(str(p) for p in parts) or "(top)"


# --- core kinds: kubernetes-validate ---------------------------------------------------------------


class UnknownVersion(ValueError):
    """A Kubernetes version the installed schemas do not cover: bad input, named before anything is written."""


def check_version(version: str) -> None:
    """Raise UnknownVersion unless kubernetes-validate ships schemas for exactly this major.minor (never a fallback
    to an older one, kubernetes-validate's own behaviour)."""
    kv = _require("kubernetes_validate", "kubernetes-validate")
    shipped = list(dict.fromkeys(kv.utils.major_minor(v) for v in kv.utils.all_versions()))
    # major.minor, optionally .patch and a leading v: '1.33; rm -rf /' was read as 1.33 and echoed in the verdict.
    if not re.fullmatch(r"v?[0-9]+\.[0-9]+(\.[0-9]+)?", version) or kv.utils.major_minor(
        version.removeprefix("v")
    ) not in shipped:
        raise UnknownVersion(
            f"--kubernetes-version {version}: kubernetes-validate {kv.__version__} has no schemas for it; "
            f"allowed: {', '.join(shipped)}"
        )


def core_problems(document: Mapping[str, Any], version: str = KUBERNETES_VERSION, where: str = "") -> list[str]:
    kv = _require("kubernetes_validate", "kubernetes-validate")
    check_version(version)
    try:
        kv.validate(dict(document), version, strict=True)
    except kv.ValidationError as exc:
        return [f"{where or _name(document)}: {_path(exc.path)}: {exc.message} (Kubernetes {exc.version} schema)"]
    except kv.SchemaNotFoundError as exc:
        return [f"{where or _name(document)}: {exc.message}"]
    return []


def pod_template_problems(template: object, where: str, version: str = KUBERNETES_VERSION) -> list[str]:
    """A PodTemplateSpec, checked as the ``template`` of a core/v1 PodTemplate object."""
    wrapper = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "check"}, "template": template}
    problems = core_problems(wrapper, version, where)
    problems = [p.replace(": template.", ": ", 1) if ": template." in p else p for p in problems]
    return problems + resource_problems(template, where)


def resource_problems(template: object, where: str) -> list[str]:
    """The API server's rules on container resources that no schema encodes (ValidateResourceRequirements in
    k8s.io/kubernetes pkg/apis/core/validation): a hugepages-<size> quantity is a positive multiple of the page
    size, a container with hugepages also limits or requests cpu or memory, an extended resource is an integer."""
    spec = template.get("spec") if isinstance(template, Mapping) else None
    if not isinstance(spec, Mapping):
        return []
    problems = []
    for field_name in ("initContainers", "containers"):
        containers = spec.get(field_name)
        for index, container in enumerate(containers if isinstance(containers, list) else []):
            resources = container.get("resources") if isinstance(container, Mapping) else None
            if not isinstance(resources, Mapping):
                continue
            names: set[str] = set()
            for part in ("limits", "requests"):
                values = resources.get(part)
                for name, value in values.items() if isinstance(values, Mapping) else []:
                    names.add(str(name))
                    path = f"{where}: spec.{field_name}.{index}.resources.{part}.{name}"
                    if str(name).startswith("hugepages-"):
                        page = k8s.quantity_value(str(name).removeprefix("hugepages-"))
                        number = k8s.quantity_value(value)
                        whole = number is not None and page is not None and k8s.whole_multiple(number, page)
                        if page is not None and page > 0 and number is not None and not whole:
                            problems.append(f"{path}: {value} is not a whole multiple of {str(name)[10:]}")
                    elif k8s.is_extended_resource(str(name)) and k8s.extended_problem(value) is not None:
                        problems.append(f"{path}: {value} must be an integer (an extended resource)")
            hugepages = sorted(n for n in names if n.startswith("hugepages-"))
            if hugepages and not {"cpu", "memory"} & names:
                problems.append(
                    f"{where}: spec.{field_name}.{index}.resources: HugePages require cpu or memory "
                    f"(a cpu or memory limit or request beside {', '.join(hugepages)})"
                )
    return problems


# --- kubeflow.org/v1: the training SDK's typed models ----------------------------------------------

_LIST = re.compile(r"^list\[(.+)\]$")
_DICT = re.compile(r"^dict\(([^,]+), (.+)\)$")


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def _walk(value: Any, type_name: str, path: str, problems: list[str], models: Any) -> Any:
    """Build the SDK model of ``value`` field by field, reporting unknown fields and wrong types.

    ``path`` is the field path so far ('' at the top); problems read ``path: what is wrong``.
    """
    primitives: dict[str, Callable[[Any], bool]] = {
        "str": lambda v: isinstance(v, str),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "bool": lambda v: isinstance(v, bool),
        "object": lambda v: True,
        "datetime": lambda v: isinstance(v, str),
        "date": lambda v: isinstance(v, str),
    }
    if type_name in primitives:
        if not primitives[type_name](value):
            problems.append(f"{path or '(top)'}: {value!r} is not of type {type_name}")
        return value
    list_match = _LIST.match(type_name)
    if list_match:
        if not isinstance(value, list):
            problems.append(f"{path or '(top)'}: expected a list of {list_match.group(1)}")
            return None
        return [_walk(v, list_match.group(1), _join(path, i), problems, models) for i, v in enumerate(value)]
    dict_match = _DICT.match(type_name)
    if dict_match:
        if not isinstance(value, Mapping):
            problems.append(f"{path or '(top)'}: expected a mapping of {dict_match.group(2)}")
            return None
        return {k: _walk(v, dict_match.group(2), _join(path, k), problems, models) for k, v in value.items()}
    model = getattr(models, type_name, None)
    if model is None:
        problems.append(f"{path}: the SDK has no type {type_name}")
        return None
    if not isinstance(value, Mapping):
        problems.append(f"{path or '(top)'}: expected an object ({type_name})")
        return None
    fields = {json_name: attribute for attribute, json_name in model.attribute_map.items()}
    arguments = {}
    for key, item in value.items():
        if key not in fields:
            problems.append(f"{_join(path, key)}: unknown field of {type_name}")
            continue
        attribute = fields[key]
        arguments[attribute] = _walk(item, model.openapi_types[attribute], _join(path, key), problems, models)
    try:
        return model(**arguments)
    except (TypeError, ValueError) as exc:  # the models check required fields and enums themselves
        problems.append(f"{path or '(top)'}: {exc} ({type_name})")
        return None


_SDK_MODELS = {"PyTorchJob": "KubeflowOrgV1PyTorchJob", "MPIJob": "KubeflowOrgV1MPIJob"}
_REPLICA_KEYS = {
    "PyTorchJob": ("pytorchReplicaSpecs", ("Master", "Worker")),
    "MPIJob": ("mpiReplicaSpecs", ("Launcher", "Worker")),
}
_V1_RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")


def kubeflow_v1_problems(document: Mapping[str, Any], version: str = KUBERNETES_VERSION) -> list[str]:
    models = _require("kubeflow.training.models", "kubeflow-training")
    kind = str(document.get("kind"))
    name = _name(document)
    walked: list[str] = []
    _walk(document, _SDK_MODELS[kind], "", walked, models)
    problems = [f"{name}: {p} (kubeflow-training model)" for p in walked]
    spec = document.get("spec") if isinstance(document.get("spec"), Mapping) else {}
    key, allowed = _REPLICA_KEYS[kind]
    replicas = (spec or {}).get(key) or {}
    for replica_type, replica in replicas.items() if isinstance(replicas, Mapping) else []:
        where = f"{name}: spec.{key}.{replica_type}"
        if replica_type not in allowed:
            problems.append(f"{where}: unknown replica type; allowed: {', '.join(allowed)}")
        if not isinstance(replica, Mapping):
            continue
        if replica.get("restartPolicy", "Never") not in _V1_RESTART_POLICIES:
            problems.append(f"{where}.restartPolicy: allowed: {', '.join(_V1_RESTART_POLICIES)}")
        if replica_type in ("Master", "Launcher") and replica.get("replicas", 1) != 1:
            problems.append(f"{where}.replicas: there is exactly one {replica_type}")
        containers = ((replica.get("template") or {}).get("spec") or {}).get("containers") or []
        if kind == "PyTorchJob" and "pytorch" not in [c.get("name") for c in containers if isinstance(c, Mapping)]:
            problems.append(f"{where}: training-operator runs the container named 'pytorch'; there is none")
        problems += pod_template_problems(replica.get("template"), f"{where}.template", version)
    if kind == "PyTorchJob" and "Master" not in replicas:
        problems.append(f"{name}: spec.{key}: a Master replica is required (torchrun's rendezvous host)")
    if kind == "MPIJob" and "Launcher" not in replicas:
        problems.append(f"{name}: spec.{key}: a Launcher replica is required")
    return problems


# --- kubeflow.org/v2beta1 MPIJob: the CRD schema ---------------------------------------------------


def mpijob_v2beta1_problems(document: Mapping[str, Any], version: str = KUBERNETES_VERSION) -> list[str]:
    jsonschema = _require("jsonschema", "jsonschema")
    name = _name(document)
    validator = jsonschema.Draft202012Validator(mpijob_schema.SCHEMA)
    problems = [
        f"{name}: {_path(e.absolute_path)}: {e.message} (MPIJob {mpijob_schema.API_VERSION} CRD schema)"
        for e in sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    ]
    spec = document.get("spec") if isinstance(document.get("spec"), Mapping) else {}
    replicas = (spec or {}).get("mpiReplicaSpecs") or {}
    metadata = document.get("metadata") if isinstance(document.get("metadata"), Mapping) else {}
    job_name = str((metadata or {}).get("name", ""))
    workers = (replicas.get("Worker") or {}).get("replicas", 1) if isinstance(replicas, Mapping) else 1
    # mpi-operator refuses a job whose last worker's host name would not be a DNS label.
    last = f"{job_name}-worker-{max(int(workers) - 1, 0) if isinstance(workers, int) else 0}"
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", last):
        problems.append(f"{name}: metadata.name: worker pod name {last!r} would not be a DNS-1123 label")
    for replica_type, replica in replicas.items() if isinstance(replicas, Mapping) else []:
        if isinstance(replica, Mapping):
            where = f"{name}: spec.mpiReplicaSpecs.{replica_type}.template"
            problems += pod_template_problems(replica.get("template"), where, version)
    return problems


def problems(document: Mapping[str, Any], version: str = KUBERNETES_VERSION) -> list[str]:
    """Every problem of one rendered object (empty: valid). Raises ValidatorUnavailable without the packages."""
    api_version, kind = document.get("apiVersion"), document.get("kind")
    if (api_version, kind) in (("apps/v1", "Deployment"), ("batch/v1", "Job")):
        spec = document.get("spec") if isinstance(document.get("spec"), Mapping) else {}
        template = (spec or {}).get("template")
        return core_problems(document, version) + resource_problems(template, f"{_name(document)}: spec.template")
    if api_version == "kubeflow.org/v1" and kind in _SDK_MODELS:
        return kubeflow_v1_problems(document, version)
    if (api_version, kind) == (mpijob_schema.API_VERSION, "MPIJob"):
        return mpijob_v2beta1_problems(document, version)
    return [f"{_name(document)}: no validator for apiVersion {api_version!r} kind {kind!r}"]


def validator_for(document: Mapping[str, Any], version: str = KUBERNETES_VERSION) -> str:
    """In words, what ``problems`` checks this object against."""
    api_version = document.get("apiVersion")
    found = versions()
    if api_version == "kubeflow.org/v1":
        return f"kubeflow-training {found['kubeflow-training']} models + Kubernetes {version} PodTemplateSpec"
    if api_version == mpijob_schema.API_VERSION:
        return f"mpi-operator CRD ({found['mpijob-v2beta1-crd']}) + Kubernetes {version} PodTemplateSpec"
    return f"Kubernetes {version} schema (kubernetes-validate {found['kubernetes-validate']}, strict)"
