package nodeimage

import "strings"

// cniManifest is /kind/manifests/default-cni.yaml: a stand-in for kindnetd
// (whose source is not in the kind module, so it cannot be built offline).
// Its DaemonSet runs cmd/kindcni on every node (host network), which writes
// a bridge + host-local conflist for the node's podCIDR and routes the
// other nodes' podCIDRs via their InternalIPs. The node authorizer does not
// let a node list other nodes, so the DaemonSet has its own ServiceAccount
// with a ClusterRole to read nodes.
//
// kind applies the file with admin credentials (`kubectl create`). The
// "would you kindly patch this file" marker makes kind add a
// CONTROL_PLANE_ENDPOINT env var to the first container, as it does for
// kindnetd, so kindcni reaches the API server without kube-proxy's Service
// rules.
func cniManifest(image string) string {
	return strings.ReplaceAll(cniManifestTemplate, "IMAGE", image)
}

const cniManifestTemplate = `# skewtest's stand-in for kindnetd: bridge CNI config for the node's
# podCIDR plus routes to the other nodes' podCIDRs (cmd/kindcni).
# would you kindly patch this file
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: skewtest-cni
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: skewtest-cni
rules:
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: skewtest-cni
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: skewtest-cni
subjects:
- kind: ServiceAccount
  name: skewtest-cni
  namespace: kube-system
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: skewtest-cni
  namespace: kube-system
  labels:
    app: skewtest-cni
    k8s-app: skewtest-cni
spec:
  selector:
    matchLabels:
      app: skewtest-cni
  template:
    metadata:
      labels:
        app: skewtest-cni
        k8s-app: skewtest-cni
    spec:
      hostNetwork: true
      serviceAccountName: skewtest-cni
      priorityClassName: system-node-critical
      nodeSelector:
        kubernetes.io/os: linux
      tolerations:
      - operator: Exists
      containers:
      - name: skewtest-cni
        image: IMAGE
        imagePullPolicy: Never
        env:
        - name: NODE_NAME
          valueFrom:
            fieldRef:
              fieldPath: spec.nodeName
        - name: CNI_CONF_DIR
          value: /etc/cni/net.d
        securityContext:
          capabilities:
            add: ["NET_ADMIN"]
        resources:
          requests:
            cpu: 10m
            memory: 20Mi
        volumeMounts:
        - name: cni-cfg
          mountPath: /etc/cni/net.d
      volumes:
      - name: cni-cfg
        hostPath:
          path: /etc/cni/net.d
          type: DirectoryOrCreate
`
