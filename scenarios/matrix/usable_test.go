package matrix

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/nodes/nodestest"
)

// fakeAPIServer answers the two requests NodeUsable makes: GET the node,
// and GET its kubelet's /healthz through the node proxy.
func fakeAPIServer(t *testing.T, kubeletVersion string, healthz int) *rest.Config {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		// Discovery, which the typed client's REST mapper reads first.
		case "/api":
			_ = json.NewEncoder(w).Encode(metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
		case "/apis":
			_ = json.NewEncoder(w).Encode(metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}})
		case "/api/v1":
			_ = json.NewEncoder(w).Encode(metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "v1",
				APIResources: []metav1.APIResource{{Name: "nodes", Kind: "Node", Verbs: metav1.Verbs{"get", "list"}}}})
		case "/api/v1/nodes/worker-1":
			n := corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "worker-1"},
				Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubeletVersion},
					Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
			_ = json.NewEncoder(w).Encode(n)
		case "/api/v1/nodes/worker-1/proxy/healthz":
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(healthz)
			if healthz == http.StatusOK {
				_, _ = w.Write([]byte("ok"))
			} else {
				_, _ = w.Write([]byte("dial tcp 127.0.0.1:10250: connect: connection refused"))
			}
		default:
			t.Logf("unexpected %s", r.URL.Path)
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

func TestNodeUsable(t *testing.T) {
	for _, tc := range []struct {
		name, running string
		healthz       int
		want          string
	}{
		{"ready at the version and answering", "v1.35.4", http.StatusOK, ""},
		{"still at the old version", "v1.36.3", http.StatusOK, "wait for node worker-1 Ready at kubelet v1.35.4"},
		{"kubelet down behind a stale Ready", "v1.35.4", http.StatusServiceUnavailable, "kubelet of node worker-1 does not answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			usable, err := NodeUsable(fakeAPIServer(t, tc.running, tc.healthz), 500*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			err = usable(context.Background(), nodestest.Idle{Cmder: exec.Local{}, Name: "worker-1"}, "v1.35.4")
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("usable: %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("usable: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
