package reconstruction

import (
	"log/slog"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/hostpath"
	"sigs.k8s.io/skewtest/reports"
)

// The kind provider's online path runs the upstream CSI hostpath driver,
// whose images this machine cannot pull. What can be proven here is that
// a real API server of the version the suite runs accepts every object of
// it, with validation and admission, through a server-side dry run.
var _ = Describe("the CSI hostpath driver objects of the kind provider's online path (not run here: its images come from registry.k8s.io)", Label("manifests"), func() {
	It("are accepted by a real v1.37.2 API server in a server-side dry run, which stores nothing", func(ctx SpecContext) {
		// One API server of the version the suite runs is all it needs:
		// made where clusters come up in seconds, skipped elsewhere.
		d := providerOf(os.Getenv("PROVIDER"))
		if !d.QuickClusters {
			Skip("needs the API server of a provider whose clusters come up in seconds here (" + strings.Join(providersWhere(func(d clusters.Descriptor) bool { return d.QuickClusters }), ", ") + "); PROVIDER=" + d.Name)
		}
		logger := slog.New(slog.NewTextHandler(GinkgoWriter, nil))
		cache := binaries.DefaultCacheDir()
		r := &binaries.Resolver{CacheDir: cache, Logger: logger}
		kubelet, err := r.Resolve(ctx, "kubelet", "module:v1.37.2")
		Expect(err).NotTo(HaveOccurred())
		prov, err := clusters.New(d.Name, clusters.Options{RunID: reports.NewRunID(time.Now()), CacheDir: cache, Logger: logger,
			APIServerVersion: version.MustParseSemantic("v1.37.2"), InitialKubelets: []binaries.Binary{kubelet}}, nil)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { Expect(prov.Down(ctx)).To(Succeed()) }, NodeTimeout(3*time.Minute))
		Expect(prov.Up(ctx)).To(Succeed())
		testNodes, err := prov.TestNodes(ctx)
		Expect(err).NotTo(HaveOccurred())
		cfg, err := prov.RESTConfig()
		Expect(err).NotTo(HaveOccurred())

		// The check kind's Up makes before it creates them.
		Expect(hostpath.Validate(ctx, cfg, testNodes[0].String())).To(Succeed())

		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		_, err = cs.StorageV1().CSIDrivers().Get(ctx, "hostpath.csi.k8s.io", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the dry run stored the CSIDriver: %v", err)
		_, err = cs.StorageV1().StorageClasses().Get(ctx, "skewtest-hostpath", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the dry run stored the StorageClass: %v", err)
		_, err = cs.AppsV1().StatefulSets("skewtest-hostpath").Get(ctx, "csi-hostpathplugin", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the dry run stored the StatefulSet: %v", err)
	})
})
