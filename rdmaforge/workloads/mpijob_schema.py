"""JSON Schema of mpi-operator's MPIJob, API version kubeflow.org/v2beta1, written for validation here.

The Kubeflow training SDK (``kubeflow-training``) models only training-operator's kubeflow.org/v1 MPIJob,
and mpi-operator publishes no Python package with its v2beta1 types, so this schema restates them from the
sources in SOURCES: the CRD's structural schema (``openAPIV3Schema`` of version v2beta1) and swagger
definitions for field names, types and enums, and the controller's validation for the rules the CRD does not
encode (launcher replicas 1, worker replicas at least 1, restartPolicy Never or OnFailure, cleanPodPolicy
None, Running or All, non-negative counts).

Pod templates are left to the Kubernetes schema of the pinned version (``PodTemplateSpec``, checked by
``validate.py`` through kubernetes-validate): the CRD embeds exactly that type, generated from k8s.io/api.
"""

from __future__ import annotations

from typing import Any

#: Where the schema below comes from (repository, path, commit), for the record.
SOURCES: tuple[dict[str, str], ...] = (
    {
        "what": "CRD mpijobs.kubeflow.org, openAPIV3Schema of version v2beta1",
        "repository": "kubeflow/mpi-operator",
        "path": "manifests/base/kubeflow.org_mpijobs.yaml",
        "commit": "013fa15b22a60180c99f5111a904b60099828f89",
    },
    {
        "what": "swagger definitions v2beta1.MPIJob, v2beta1.MPIJobSpec, v2beta1.RunPolicy, v1.ReplicaSpec",
        "repository": "kubeflow/mpi-operator",
        "path": "pkg/apis/kubeflow/v2beta1/swagger.json",
        "commit": "013fa15b22a60180c99f5111a904b60099828f89",
    },
    {
        "what": "controller validation (ValidateMPIJob) applied after defaulting",
        "repository": "kubeflow/mpi-operator",
        "path": "pkg/apis/kubeflow/validation/validation.go",
        "commit": "11a4e47835d5222504302eade4e353d7d07120ae",
    },
)

API_VERSION = "kubeflow.org/v2beta1"

_INT32 = {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}
_NON_NEGATIVE_INT32 = {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
_NON_NEGATIVE_INT64 = {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}
_QUANTITY = {
    "anyOf": [
        {"type": "integer"},
        {
            "type": "string",
            "pattern": (
                r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
                r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
            ),
        },
    ]
}


def _replica_spec(replicas: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["replicas", "template"],
        "properties": {
            "replicas": {**_INT32, **replicas},
            "restartPolicy": {"type": "string", "enum": ["Never", "OnFailure"]},
            # A PodTemplateSpec: validated against the pinned Kubernetes schema separately.
            "template": {"type": "object"},
        },
    }


SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "urn:rdmaforge:mpijob-kubeflow.org-v2beta1",
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": API_VERSION},
        "kind": {"const": "MPIJob"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "namespace": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["mpiReplicaSpecs"],
            "properties": {
                "mpiImplementation": {"type": "string", "enum": ["OpenMPI", "Intel"]},
                "mpiReplicaSpecs": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["Launcher"],
                    "properties": {
                        "Launcher": _replica_spec({"const": 1}),
                        "Worker": _replica_spec({"minimum": 1}),
                    },
                },
                "runPolicy": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "activeDeadlineSeconds": _NON_NEGATIVE_INT64,
                        "backoffLimit": _NON_NEGATIVE_INT32,
                        "cleanPodPolicy": {"type": "string", "enum": ["None", "Running", "All"]},
                        "schedulingPolicy": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {
                                "minAvailable": _INT32,
                                "minResources": {"type": "object", "additionalProperties": _QUANTITY},
                                "priorityClass": {"type": "string"},
                                "queue": {"type": "string"},
                                "scheduleTimeoutSeconds": _INT32,
                            },
                        },
                        "suspend": {"type": "boolean"},
                        "ttlSecondsAfterFinished": _NON_NEGATIVE_INT32,
                    },
                },
                "slotsPerWorker": _NON_NEGATIVE_INT32,
                "sshAuthMountPath": {"type": "string", "minLength": 1},
                "waitForWorkers": {"type": "boolean"},
            },
        },
    },
}
