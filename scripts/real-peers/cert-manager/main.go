// Command cert-manager-controller runs cert-manager's own Certificate controllers and its
// CertificateRequest approver, taken from the cert-manager module, for `make e2e-real`.
//
// cert-manager's controller binary lives in a nested module that is not published to the
// module proxy, so this is a small main of ours around the published controller packages:
// the same ContextFactory, the same registered constructors and the same informer start as
// cert-manager's own `cmd/controller`, without leader election, ACME or metrics serving.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cert-manager/cert-manager/pkg/controller"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	namespace := flag.String("namespace", "", "the one namespace to act in (all when empty)")
	clusterResources := flag.String("cluster-resource-namespace", "cert-manager", "namespace of ClusterIssuer resources")
	only := flag.String("controllers", "*", "comma-separated controllers: '*' for all, '-name' to leave one out")
	workers := flag.Int("workers", 5, "workers per controller")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *namespace, *clusterResources, *only, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager-controller:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, namespace, clusterResources, only string, workers int) error {
	// cert-manager's own defaults (internal/apis/config/controller/v1alpha1/defaults.go),
	// which its binary sets from its configuration; left zero, a failed issuance would be
	// retried at once instead of after an hour.
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		Namespace:          namespace,
		IssuerOptions:      controller.IssuerOptions{ClusterResourceNamespace: clusterResources},
		CertificateOptions: controller.CertificateOptions{
			CopiedAnnotationPrefixes:                 []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"},
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return err
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	for name, construct := range controller.Known() {
		if !enabled(only, name) {
			continue
		}
		ctrl, err := construct(factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		fmt.Fprintln(os.Stderr, "cert-manager-controller: starting", name)
		g.Go(func() error { return ctrl.Run(workers, ctx) })
	}
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	return g.Wait()
}

// enabled reads a --controllers list as cert-manager's own flag does: '*' enables all,
// '-name' disables one, a plain name enables one.
func enabled(list, name string) bool {
	items := strings.Split(list, ",")
	if slices.Contains(items, "-"+name) {
		return false
	}
	return slices.Contains(items, "*") || slices.Contains(items, name)
}
