#!/usr/bin/env bash
# Checks what deploys Floodgate without running it (deploy/image.sh builds the images and the
# container tests run them):
#   - both Dockerfiles (./Dockerfile, deploy/nginx/Dockerfile), linted by hadolint (settings in
#     .hadolint.yaml);
#   - deploy/compose.yaml, against the Compose specification's schema;
#   - every Kubernetes overlay under deploy/k8s/overlays, rendered by `kubectl kustomize` and
#     validated strictly (no field the API does not know) against the Kubernetes API's schemas
#     for the oldest Kubernetes the manifests support. A resource of a kind with no schema fails
#     the check unless it is one of the operator resources listed in OPERATOR_RESOURCES.
# The tools are installed on first use under $FLOODGATE_HOME/tools by `deploy/stack.sh tools`,
# pinned, and reused.
#
# Usage: deploy/check-deploy.sh [root]   (root: a checkout; the default is this one)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
root="$(cd "${1:-$here}" && pwd)"

FLOODGATE_HOME=${FLOODGATE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/floodgate}
TOOLS="$FLOODGATE_HOME/tools"
VENV="$TOOLS/venv"
KUBECTL="$TOOLS/kubernetes-client/usr/bin/kubectl"
# Schemas of this Kubernetes version: the oldest the manifests support (the preStop `sleep`
# action is on by default from 1.30).
KUBERNETES_VERSION=1.30.0
# Resources of operators the manifests rely on, which Kubernetes' own schemas do not describe:
# apiVersion and kind, one per line.
OPERATOR_RESOURCES='monitoring.coreos.com/v1 ServiceMonitor
monitoring.coreos.com/v1 PrometheusRule'

say() { printf '\033[1m[deploy-check]\033[0m %s\n' "$*"; }
fail() { printf '\033[31m[deploy-check] %s\033[0m\n' "$*" >&2; exit 1; }

# kubectl and the Python tools, under $TOOLS by the stack script.
"$here/deploy/stack.sh" tools >/dev/null
cd "$root"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

say "hadolint Dockerfile deploy/nginx/Dockerfile"
"$VENV/bin/hadolint" --config .hadolint.yaml Dockerfile deploy/nginx/Dockerfile

say "compose: deploy/compose.yaml against the Compose specification"
"$VENV/bin/check-jsonschema" --builtin-schema vendor.compose-spec deploy/compose.yaml

for overlay in deploy/k8s/overlays/*/; do
  name=$(basename "$overlay")
  say "kubernetes: $name rendered and validated (Kubernetes $KUBERNETES_VERSION, strict)"
  "$KUBECTL" kustomize "$overlay" >"$work/$name.yaml" || fail "$overlay does not render"
  # Operator resources are set aside (each must still name itself); everything else must match
  # a schema of Kubernetes' own.
  OPERATOR_RESOURCES="$OPERATOR_RESOURCES" "$VENV/bin/python" - "$work/$name.yaml" \
    "$work/$name.core.yaml" <<'PY'
import os, sys, yaml
allowed = {tuple(line.split()) for line in os.environ["OPERATOR_RESOURCES"].splitlines() if line.strip()}
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
core = []
for doc in docs:
    key = (doc.get("apiVersion", ""), doc.get("kind", ""))
    if key in allowed:
        if not doc.get("metadata", {}).get("name"):
            sys.exit(f"{key[1]} without a name")
        print(f"  {key[1]} {doc['metadata']['name']}: an operator resource, not validated here")
    else:
        core.append(doc)
yaml.safe_dump_all(core, open(sys.argv[2], "w"))
print(f"  {len(core)} resources to validate")
PY
  # kubernetes-validate only warns about a kind it has no schema for: that fails here.
  if ! report=$("$VENV/bin/kubernetes-validate" --strict --kubernetes-version \
    "$KUBERNETES_VERSION" --quiet "$work/$name.core.yaml" 2>&1); then
    echo "$report"
    fail "$overlay: the rendered manifests are not valid"
  fi
  if grep -q "Couldn't find schema" <<<"$report"; then
    echo "$report"
    fail "$overlay: a resource of a kind with no schema (an operator's must be in OPERATOR_RESOURCES)"
  fi
  [ -z "$report" ] || echo "$report"
done
say "deployment files: all checks pass"
