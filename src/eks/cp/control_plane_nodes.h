#pragma once
// The Node side of eks::ProcessControlPlanes (private to hf_eks_cp): what a node joins with
// (files made once per node, kept in the control plane's directory) and the deciding part of
// the Node operations, which run kubectl (pure, table-tested: parsing its answers, the patch
// an update sends, what its failures mean).
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/status.h"
#include "hyperfleet/eks/control_plane.h"
#include "hyperfleet/eks/control_plane_plan.h"

namespace hf::eks {

/// True when `name` is a Kubernetes Node name: a DNS subdomain (RFC 1123) of at most 253
/// characters, dot-separated labels of lowercase letters, digits and '-', each starting and
/// ending with a letter or digit.
bool ValidNodeName(std::string_view name);
/// Ok when ValidNodeName(name); else InvalidArgument saying what a node name must be.
Status CheckNodeName(std::string_view name);

/// The Nodes in `kubectl get nodes -o json`'s answer (a v1 List or NodeList), sorted by name.
/// A Node is ready when its "Ready" condition's status is "True" (False, Unknown or no such
/// condition: not ready). Errors: InvalidArgument when `json` is not such a list or a Node has
/// no metadata.name or a malformed label, taint or condition.
StatusOr<std::vector<KubeNode>> ParseNodeList(std::string_view json);

/// Empties the pod_cidr of every node in `nodes` whose pod_cidr is not an IPv4 CIDR
/// ("a.b.c.d/n", the address being the network's) inside `cluster_cidr` (the control
/// plane's --cluster-cidr): only ranges the controller-manager can have given are routed
/// to nodes; a Node made by hand with another range (the host's own network, say) is not.
void KeepPodCidrsWithin(std::vector<KubeNode>& nodes, std::string_view cluster_cidr);

/// The JSON merge patch (`kubectl patch --type=merge`) that applies `update` to `node` (the
/// Node as `kubectl get node -o json` shows it): labels set (removed ones as null); when the
/// update names taints, spec.taints in full (the Node's own, less those removed or replaced
/// by key and effect, then the set ones); metadata.resourceVersion of `node`, so that the
/// apiserver refuses it (Conflict) when the Node changed in between. Errors: InvalidArgument
/// when `node` is not an object with metadata.resourceVersion.
StatusOr<nlohmann::json> NodePatch(const nlohmann::json& node, const NodeUpdate& update);

/// What a failed kubectl run's output means, as a Status whose message is `what` and the
/// output's first line: Unavailable when the apiserver did not answer (connection refused,
/// unable to connect, timeouts, ServiceUnavailable); NotFound, Aborted (Conflict),
/// InvalidArgument (Invalid, BadRequest), PermissionDenied (Forbidden, Unauthorized) for the
/// server's answers of those kinds; Internal for anything else.
Status KubectlFailure(std::string_view what, std::string_view output);

/// Node `node_name`'s NodeJoin: read from <dir>/nodes/<node_name>/kubelet.kubeconfig and
/// <dir>/kube-proxy.kubeconfig, each made first when missing (a client certificate of the
/// control plane's CA, pki/ca.crt and ca.key: CN "system:node:<node_name>", O
/// "system:nodes"; CN "system:kube-proxy"; server https://<endpoint_host>:<apiserver port>;
/// 0600 in 0700 directories). The caller holds the control plane's lock (two calls must not
/// make two certificates). Errors: InvalidArgument for a bad node name; Internal for files
/// and OpenSSL.
StatusOr<NodeJoin> LoadOrMakeNodeJoin(const ControlPlaneLayout& layout,
                                      const ControlPlanePlan& plan, std::string_view node_name);

}  // namespace hf::eks
