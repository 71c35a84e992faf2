{{/* Chart name, or nameOverride. */}}
{{- define "cfssl-issuer.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Prefix of every resource name: fullnameOverride, else <release>-<chart name> (just the
release name when it already contains the chart name). 63 characters at most.
*/}}
{{- define "cfssl-issuer.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels on every resource. */}}
{{- define "cfssl-issuer.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "cfssl-issuer.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels that select the manager pods; never change them, Deployment selectors are immutable. */}}
{{- define "cfssl-issuer.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cfssl-issuer.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The manager's ServiceAccount. */}}
{{- define "cfssl-issuer.serviceAccountName" -}}
{{- include "cfssl-issuer.fullname" . }}
{{- end }}

{{/* <repository>/<name>:<tag>, the tag defaulting to the chart's appVersion. */}}
{{- define "cfssl-issuer.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion }}
{{- if .Values.image.repository }}
{{- printf "%s/%s:%s" (trimSuffix "/" .Values.image.repository) .Values.image.name $tag }}
{{- else }}
{{- printf "%s:%s" .Values.image.name $tag }}
{{- end }}
{{- end }}

{{/* Namespace of ClusterIssuer Secrets: clusterResourceNamespace or the release namespace. */}}
{{- define "cfssl-issuer.clusterResourceNamespace" -}}
{{- .Values.clusterResourceNamespace | default .Release.Namespace }}
{{- end }}

{{/*
"true" when the Issuer and ClusterIssuer objects can be rendered in this release.

Helm maps every object of a release to an API before it creates any, so an Issuer cannot
be installed in the same `helm install` that creates its CRD ("resource mapping not
found ... ensure CRDs are installed first"). With crds.install the issuers are therefore
rendered only once the cluster serves the API: the first install creates the CRDs, the
manager and the Secrets, and the next `helm upgrade` (same values) creates the issuers.
Offline, `helm template --api-versions cfssl-issuer.wikimedia.org/v1alpha1` renders them.
*/}}
{{- define "cfssl-issuer.issuersRenderable" -}}
{{- if or (not .Values.crds.install) (.Capabilities.APIVersions.Has "cfssl-issuer.wikimedia.org/v1alpha1") -}}
true
{{- end }}
{{- end }}

{{/*
The job label the manager's series carry, which the PrometheusRule and the dashboard select on:
metrics.job, else "cert-manager" in standalone mode (the manager stands in for cert-manager's
controller, so the cert-manager mixin's up{job="cert-manager"} finds it), else the fullname.
*/}}
{{- define "cfssl-issuer.metricsJob" -}}
{{- if .Values.metrics.job -}}
{{- .Values.metrics.job -}}
{{- else if .Values.certificateControllers.enabled -}}
cert-manager
{{- else -}}
{{- include "cfssl-issuer.fullname" . -}}
{{- end -}}
{{- end }}

{{/*
Labels that select the CSI plugin's pods. Their app.kubernetes.io/name is not the manager's,
so the manager's selectors (Deployment, metrics Service, PodDisruptionBudget), which select on
name and instance, never take the plugin's pods.
*/}}
{{- define "cfssl-issuer.csiSelectorLabels" -}}
app.kubernetes.io/name: {{ include "cfssl-issuer.name" . }}-csi-driver
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: csi-driver
{{- end }}

{{/* Labels on every object of the CSI plugin. */}}
{{- define "cfssl-issuer.csiLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "cfssl-issuer.csiSelectorLabels" . }}
app.kubernetes.io/part-of: {{ include "cfssl-issuer.name" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Name of the CSI plugin's DaemonSet, ServiceAccount and RBAC. */}}
{{- define "cfssl-issuer.csiName" -}}
{{- printf "%s-csi-driver" (include "cfssl-issuer.fullname" . | trunc 52 | trimSuffix "-") }}
{{- end }}

{{/*
csi.dataDir, cleaned; the chart fails on a relative path or one under /tmp or /var/tmp, which
tmp cleaners (systemd-tmpfiles) empty under a running plugin. values.schema.json refuses the
plain spellings; this catches the rest (/var/lib/../../tmp/x).
*/}}
{{- define "cfssl-issuer.csiDataDir" -}}
{{- $dir := clean .Values.csi.dataDir }}
{{- if not (isAbs $dir) }}
{{- fail (printf "csi.dataDir %q must be an absolute path" .Values.csi.dataDir) }}
{{- end }}
{{- range list "/tmp" "/var/tmp" }}
{{- if or (eq $dir .) (hasPrefix (printf "%s/" .) $dir) }}
{{- fail (printf "csi.dataDir %q is under %s, whose cleaners delete the plugin's volumes: use a directory such as /var/lib/cfssl-issuer-csi" $.Values.csi.dataDir .) }}
{{- end }}
{{- end }}
{{- if eq $dir "/" }}
{{- fail "csi.dataDir must not be /" }}
{{- end }}
{{- $dir }}
{{- end }}
