package nodeimage

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// defaultImageRepository is kubeadm's default image repository
// (kubeadmapiv1.DefaultImageRepository), which kind does not override.
const defaultImageRepository = "registry.k8s.io"

var (
	pauseVersionRE   = regexp.MustCompile(`(?m)^\s*PauseVersion\s*=\s*"([^"]+)"`)
	coreDNSVersionRE = regexp.MustCompile(`(?m)^\s*CoreDNSVersion\s*=\s*"([^"]+)"`)
	defaultEtcdRE    = regexp.MustCompile(`(?m)^\s*DefaultEtcdVersion\s*=\s*"([^"]+)"`)
	supportedEtcdRE  = regexp.MustCompile(`(?s)SupportedEtcdVersion\s*=\s*map\[uint8\]string\{(.*?)\}`)
	etcdEntryRE      = regexp.MustCompile(`(\d+)\s*:\s*"([^"]+)"`)
)

// kubeadmImages computes the images `kubeadm config images list
// --kubernetes-version v` prints, from the source of kubeadm's
// cmd/kubeadm/app/constants/constants.go of that version: the
// Kubernetes images tagged v, etcd per SupportedEtcdVersion (nearest entry
// when the minor version is outside the map, as EtcdSupportedVersion does),
// CoreDNS under coredns/ and pause.
func kubeadmImages(constantsGo []byte, v *version.Version) ([]string, error) {
	src := string(constantsGo)
	get := func(re *regexp.Regexp, what string) (string, error) {
		m := re.FindStringSubmatch(src)
		if m == nil {
			return "", fmt.Errorf("kubeadm constants: %s not found", what)
		}
		return m[1], nil
	}
	pause, err := get(pauseVersionRE, "PauseVersion")
	if err != nil {
		return nil, err
	}
	coredns, err := get(coreDNSVersionRE, "CoreDNSVersion")
	if err != nil {
		return nil, err
	}
	etcd, err := get(defaultEtcdRE, "DefaultEtcdVersion")
	if err != nil {
		return nil, err
	}
	if m := supportedEtcdRE.FindStringSubmatch(src); m != nil {
		supported := map[int]string{}
		for _, e := range etcdEntryRE.FindAllStringSubmatch(m[1], -1) {
			minor, _ := strconv.Atoi(e[1])
			supported[minor] = e[2]
		}
		if s := supportedEtcd(supported, int(v.Minor())); s != "" {
			etcd = s
		}
	}
	// kubeadm formats the etcd tag through version.ParseSemantic.
	if ev, err := version.ParseSemantic(etcd); err == nil {
		etcd = ev.String()
	}
	tag := strings.ReplaceAll("v"+v.String(), "+", "_")
	r := defaultImageRepository
	return []string{
		r + "/kube-apiserver:" + tag,
		r + "/kube-controller-manager:" + tag,
		r + "/kube-scheduler:" + tag,
		r + "/kube-proxy:" + tag,
		r + "/coredns/coredns:" + coredns,
		r + "/pause:" + pause,
		r + "/etcd:" + etcd,
	}, nil
}

// supportedEtcd is kubeadm's EtcdSupportedVersion: the entry for minor, or
// the nearest end of the map.
func supportedEtcd(m map[int]string, minor int) string {
	if s, ok := m[minor]; ok {
		return s
	}
	if len(m) == 0 {
		return ""
	}
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	if minor < keys[0] {
		return m[keys[0]]
	}
	if minor > keys[len(keys)-1] {
		return m[keys[len(keys)-1]]
	}
	return ""
}

// imageRef is a parsed image name.
type imageRef struct {
	Ref  string // the whole name
	Name string // last path element, e.g. kube-apiserver
	Tag  string
}

// kubeadmImageSet is kubeadm's image list by role.
type kubeadmImageSet struct {
	APIServer, ControllerManager, Scheduler, Proxy, CoreDNS, Pause, Etcd imageRef
}

// parseKubeadmImages sorts kubeadm's image list into roles; every role must
// be there exactly once.
func parseKubeadmImages(list []string) (kubeadmImageSet, error) {
	var s kubeadmImageSet
	slots := map[string]*imageRef{
		"kube-apiserver":          &s.APIServer,
		"kube-controller-manager": &s.ControllerManager,
		"kube-scheduler":          &s.Scheduler,
		"kube-proxy":              &s.Proxy,
		"coredns":                 &s.CoreDNS,
		"pause":                   &s.Pause,
		"etcd":                    &s.Etcd,
	}
	for _, ref := range list {
		repo, tag, ok := strings.Cut(ref[strings.LastIndex(ref, "/")+1:], ":")
		if !ok {
			return s, fmt.Errorf("image %q has no tag", ref)
		}
		slot, known := slots[repo]
		if !known {
			return s, fmt.Errorf("kubeadm wants image %q, which this builder cannot make", ref)
		}
		if slot.Ref != "" {
			return s, fmt.Errorf("kubeadm lists %s twice", repo)
		}
		*slot = imageRef{Ref: ref, Name: repo, Tag: tag}
	}
	for name, slot := range slots {
		if slot.Ref == "" {
			return s, fmt.Errorf("kubeadm's image list has no %s", name)
		}
	}
	return s, nil
}
