// Command fakeaws is the fake of AWS and of the kops CLI that make
// test-hosts runs the kops provider against (package fakeaws): AWS and a
// kops binary cannot exist on the test machines.
//
//	fakeaws serve -world FILE -url-file FILE   # EC2, ELB v2 and S3 on loopback
//	fakeaws node -world FILE ...               # the worker is this machine
//	kops ...                                   # a link named kops: the fake kops
//
// serve answers only requests signed with $AWS_ACCESS_KEY_ID, and runs
// until it is signalled. The fake kops finds
// the world through $SKEWTEST_FAKE_WORLD.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/skewtest/clusters/kops/internal/fakeaws"
)

func main() {
	if filepath.Base(os.Args[0]) == "kops" {
		world := os.Getenv(fakeaws.WorldEnv)
		if world == "" {
			fmt.Fprintf(os.Stderr, "fake kops: set %s to the fake world's file\n", fakeaws.WorldEnv)
			os.Exit(1)
		}
		os.Exit(fakeaws.Kops(&fakeaws.Store{Path: world}, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
	}
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "node":
		err = node(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeaws:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: fakeaws serve -world FILE -url-file FILE | fakeaws node -world FILE ... | kops ...")
	os.Exit(2)
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	world := fs.String("world", "", "the world's file")
	urlFile := fs.String("url-file", "", "where to write the endpoint URL once listening")
	fs.Parse(args)
	akid := os.Getenv("AWS_ACCESS_KEY_ID")
	if *world == "" || *urlFile == "" || akid == "" {
		return errors.New("serve needs -world, -url-file and AWS_ACCESS_KEY_ID")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: fakeaws.NewHandler(&fakeaws.Store{Path: *world}, akid), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	if err := os.WriteFile(*urlFile, []byte("http://"+ln.Addr().String()+"\n"), 0o600); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "fakeaws: serving EC2, ELB v2 and S3 at http://"+ln.Addr().String())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

func node(args []string) error {
	fs := flag.NewFlagSet("node", flag.ExitOnError)
	world := fs.String("world", "", "the world's file")
	var n fakeaws.Node
	fs.StringVar(&n.PublicIP, "public-ip", "", "the worker's public address, reached over SSH on port 22 (default: this machine's first global IPv4 address)")
	fs.StringVar(&n.PrivateIP, "private-ip", "", "the worker's private address (default: the InternalIP of -node)")
	nodeName := fs.String("node", "", "the Node of -kubeconfig's cluster that is this machine")
	hostKeys := fs.String("host-keys", "/etc/ssh/ssh_host_*_key.pub", "the machine's SSH host public keys")
	fs.StringVar(&n.SSHUser, "ssh-user", "root", "the SSH user")
	fs.StringVar(&n.AuthorizedKeys, "authorized-keys", "/root/.ssh/authorized_keys", "where cloud-init would install the cluster's key")
	fs.StringVar(&n.Kubeconfig, "kubeconfig", "", "the machine's cluster's admin kubeconfig")
	fs.Parse(args)
	if *world == "" || n.Kubeconfig == "" || (n.PrivateIP == "" && *nodeName == "") {
		return errors.New("node needs -world, -kubeconfig, and -private-ip or -node")
	}
	var err error
	if n.PublicIP == "" {
		if n.PublicIP, err = globalIPv4(); err != nil {
			return err
		}
	}
	if n.PrivateIP == "" {
		if n.PrivateIP, err = internalIP(n.Kubeconfig, *nodeName); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "fakeaws: the worker is this machine: public %s, private %s, SSH user %s\n", n.PublicIP, n.PrivateIP, n.SSHUser)
	files, _ := filepath.Glob(*hostKeys)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		n.HostKeys = append(n.HostKeys, strings.TrimSpace(string(b)))
	}
	if len(n.HostKeys) == 0 {
		// A machine with no .pub beside its host keys (sshd needs only
		// the private ones): the public halves, as sshd offers them.
		privs, _ := filepath.Glob(strings.TrimSuffix(*hostKeys, ".pub"))
		for _, f := range privs {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			signer, err := ssh.ParsePrivateKey(b)
			if err != nil {
				return fmt.Errorf("host key %s: %w", f, err)
			}
			n.HostKeys = append(n.HostKeys, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))))
		}
	}
	if len(n.HostKeys) == 0 {
		return fmt.Errorf("no host keys at %s", *hostKeys)
	}
	return (&fakeaws.Store{Path: *world}).Update(func(w *fakeaws.World) error {
		w.Node = &n
		return nil
	})
}

// globalIPv4 is this machine's first IPv4 address that is neither
// loopback nor link-local.
func globalIPv4() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
			return ipn.IP.String(), nil
		}
	}
	return "", errors.New("no global IPv4 address: give -public-ip")
}

// internalIP is node's InternalIP in kubeconfig's cluster.
func internalIP(kubeconfig, node string) (string, error) {
	cs, err := fakeaws.Clientset(kubeconfig)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address, nil
		}
	}
	return "", fmt.Errorf("node %s has no InternalIP", node)
}
