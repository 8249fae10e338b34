// Command skewtest runs skew runs outside Ginkgo and the chores around
// them:
//
//	skewtest run                 one run, configured by the same environment
//	                             variables as make test-skew (PLAN, PROVIDER, ...)
//	skewtest matrix              the matrix tour (MATRIX, MATRIX_NODES, ...),
//	                             as make test-matrix runs it
//	skewtest catalogue           every catalogue entry that runs on PROVIDER,
//	                             as one batch on BATCH_NODES nodes at once
//	skewtest mutants             the mutation score: the catalogue run on
//	                             the project's mutants of the kubelet and
//	                             an unmutated control, as one batch
//	skewtest bench [-rounds N]   N runs, phase timings min/median/max, JSON
//	skewtest bench-scale         what reconstruction costs on a busy node: runs
//	                             of N pods and of one pod with N volumes per
//	                             CSI driver mode, each hop's times, kubelet CPU
//	                             and memory against N, fits, JSON, Markdown, SVG
//	skewtest build VERSION C,..  build Kubernetes components from the Go module
//	skewtest build-containerd    build containerd v2 from its Go module
//	skewtest kind-node-image V   build the offline kind node image of version V
//	skewtest clean [RUNDIR...]   undo what killed runs left behind (local and
//	                             kind runs; an existing cluster's nodes get their
//	                             own kubelet back)
//	skewtest footprint save|compare FILE
//	                             record the host's footprint; compare the
//	                             host with it, naming every difference
//	skewtest settings            list the environment variables
//	skewtest helpers DIR         write the helper programs (podbin, the CSI
//	                             driver, kindcni, the runc shim) into DIR:
//	                             carried by bin/skewtest, built from source
//	                             by any other build
//	skewtest signoff DIR         the sign-off page of the runs under DIR
//	skewtest scenarios           the reconstruction catalogue: every shape and
//	                             fault, expected outcome per kubelet version
//	skewtest vm image|up|exec|down  a Debian 12 guest (systemd, cgroup v2) under qemu
//	skewtest janitor-aws [-dry-run=false]
//	                             list (delete) AWS resources of kops runs whose
//	                             expiry tag has passed
//
// Each verb is one file of this package; commands.go lists them.
package main
