package hostpath

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/klient/k8s"
)

// The plugin pod runs every sidecar under one service account, bound to
// each sidecar's roles, as csi-hostpath-plugin.yaml does; the sidecars' own
// service accounts of their rbac.yaml are left out, nothing would use them.
//
// Cluster-scoped names carry a skewtest-hostpath- prefix: the sidecars'
// rbac.yaml asks for "different names for non-namespaced entities" so that
// a cluster with upstream's deployment (or another driver using the
// upstream names) keeps its own ClusterRoles, and Deploy, which leaves
// existing objects alone, does not bind to rules it did not write.
const (
	serviceAccountName = "csi-hostpathplugin-sa"
	clusterPrefix      = "skewtest-hostpath-"

	provisionerClusterRole = clusterPrefix + "external-provisioner-runner"
	provisionerRole        = "external-provisioner-cfg"
	attacherClusterRole    = clusterPrefix + "external-attacher-runner"
	attacherRole           = "external-attacher-cfg"
)

func rbacObjects() []k8s.Object {
	return []k8s.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: serviceAccountName, Namespace: Namespace, Labels: labelsFor("csi-hostpathplugin", "serviceaccount")}},
		provisionerRunner(),
		provisionerCfg(),
		attacherRunner(),
		attacherCfg(),
		clusterBinding(clusterPrefix+"provisioner-cluster-role", "provisioner-cluster-role", provisionerClusterRole),
		clusterBinding(clusterPrefix+"attacher-cluster-role", "attacher-cluster-role", attacherClusterRole),
		roleBinding("csi-hostpathplugin-provisioner-role", "provisioner-role", provisionerRole),
		roleBinding("csi-hostpathplugin-attacher-role", "attacher-role", attacherRole),
	}
}

func rule(group, resource string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}
}

// provisionerRunner follows external-provisioner-runner of
// kubernetes-csi/external-provisioner deploy/kubernetes/rbac.yaml, as
// csi-driver-host-path publishes it in
// charts/csi-hostpathplugin/templates/CSI_PROVISIONER-rbac.yaml (commit
// ac5e49a8, external-provisioner v5), with the one change since that the
// release notes of v6.0.1, v6.1.1 and v6.2.0 name: watch and update on
// volumesnapshots (#1458), which v6.3.0's snapshot finalizer controller
// uses. The commented-out secrets rule stays out: hostpath uses none.
func provisionerRunner() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: provisionerClusterRole, Labels: labelsFor("csi-hostpathplugin", "provisioner-cluster-role")},
		Rules: []rbacv1.PolicyRule{
			rule("", "persistentvolumes", "get", "list", "watch", "create", "patch", "delete"),
			rule("", "persistentvolumeclaims", "get", "list", "watch", "update"),
			rule("storage.k8s.io", "storageclasses", "get", "list", "watch"),
			rule("", "events", "list", "watch", "create", "update", "patch"),
			rule("snapshot.storage.k8s.io", "volumesnapshots", "get", "list", "watch", "update"),
			rule("snapshot.storage.k8s.io", "volumesnapshotcontents", "get", "list"),
			rule("storage.k8s.io", "csinodes", "get", "list", "watch"),
			rule("", "nodes", "get", "list", "watch"),
			// The provisioner waits for VolumeAttachments to go before it
			// deletes a volume of a driver that attaches.
			rule("storage.k8s.io", "volumeattachments", "get", "list", "watch"),
		},
	}
}

// provisionerCfg follows external-provisioner-cfg of the same file: leader
// election leases, and CSIStorageCapacity with the owner lookups it needs.
func provisionerCfg() *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: provisionerRole, Namespace: Namespace, Labels: labelsFor("csi-hostpathplugin", "provisioner-role")},
		Rules: []rbacv1.PolicyRule{
			rule("coordination.k8s.io", "leases", "get", "watch", "list", "delete", "update", "create"),
			rule("storage.k8s.io", "csistoragecapacities", "get", "list", "watch", "create", "update", "patch", "delete"),
			rule("", "pods", "get"),
			rule("apps", "replicasets", "get"),
		},
	}
}

// attacherRunner follows external-attacher-runner of
// kubernetes-csi/external-attacher deploy/kubernetes/rbac.yaml as
// published in charts/csi-hostpathplugin/templates/CSI_ATTACHER-rbac.yaml
// (commit c7998351); the attacher's release notes up to v4.11 name no
// RBAC change since.
func attacherRunner() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: attacherClusterRole, Labels: labelsFor("csi-hostpathplugin", "attacher-cluster-role")},
		Rules: []rbacv1.PolicyRule{
			rule("", "persistentvolumes", "get", "list", "watch", "patch"),
			rule("storage.k8s.io", "csinodes", "get", "list", "watch"),
			rule("storage.k8s.io", "volumeattachments", "get", "list", "watch", "patch"),
			rule("storage.k8s.io", "volumeattachments/status", "patch"),
		},
	}
}

// attacherCfg follows external-attacher-cfg of the same file.
func attacherCfg() *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: attacherRole, Namespace: Namespace, Labels: labelsFor("csi-hostpathplugin", "attacher-role")},
		Rules: []rbacv1.PolicyRule{
			rule("coordination.k8s.io", "leases", "get", "watch", "list", "delete", "update", "create"),
		},
	}
}

func pluginSubject() []rbacv1.Subject {
	return []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: serviceAccountName, Namespace: Namespace}}
}

// clusterBinding and roleBinding follow the csi-hostpathplugin-*-role
// bindings of csi-hostpath-plugin.yaml.
func clusterBinding(name, component, role string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labelsFor("csi-hostpathplugin", component)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   pluginSubject(),
	}
}

func roleBinding(name, component, role string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: labelsFor("csi-hostpathplugin", component)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role},
		Subjects:   pluginSubject(),
	}
}
