//go:build tools

// Package deps pins the modules skewtest uses before every package that
// imports them exists. Removed once they are all used.
package deps

import (
	_ "github.com/aws/aws-sdk-go-v2/aws"
	_ "github.com/aws/aws-sdk-go-v2/config"
	_ "github.com/aws/aws-sdk-go-v2/service/ec2"
	_ "github.com/container-storage-interface/spec/lib/go/csi"
	_ "github.com/google/go-containerregistry/pkg/v1/tarball"
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/gomega"
	_ "github.com/prometheus/common/expfmt"
	_ "golang.org/x/crypto/ssh"
	_ "golang.org/x/crypto/ssh/agent"
	_ "golang.org/x/crypto/ssh/knownhosts"
	_ "golang.org/x/sys/unix"
	_ "google.golang.org/grpc"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	_ "sigs.k8s.io/e2e-framework/klient"
	_ "sigs.k8s.io/e2e-framework/klient/wait"
	_ "sigs.k8s.io/e2e-framework/klient/wait/conditions"
	_ "sigs.k8s.io/kind/pkg/cluster"
)
