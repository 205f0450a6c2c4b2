{{/* Chart name. */}}
{{- define "flowtel.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-qualified name; names of cluster-scoped objects start with it. */}}
{{- define "flowtel.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "flowtel.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: flowtel
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "flowtel.node.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flowtel.name" . }}-node
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "flowtel.gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flowtel.name" . }}-gateway
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "flowtel.node.fullname" -}}{{ include "flowtel.fullname" . }}-node{{- end }}
{{- define "flowtel.gateway.fullname" -}}{{ include "flowtel.fullname" . }}-gateway{{- end }}

{{/*
Seconds a gateway replica drains before it stops (values.yaml, gateway.drainSeconds):
the given number, else what the node collectors' resolver needs to drop it.
*/}}
{{- define "flowtel.gateway.drainSeconds" -}}
{{- if kindIs "invalid" .Values.gateway.drainSeconds }}{{ if eq .Values.gateway.resolver "dns" }}15{{ else }}5{{ end }}{{ else }}{{ int .Values.gateway.drainSeconds }}{{ end }}
{{- end }}
{{- define "flowtel.flowstream.fullname" -}}{{ include "flowtel.fullname" . }}-flowstream{{- end }}

{{/* The name the gateway certificate carries and node collectors verify. */}}
{{- define "flowtel.gateway.tlsName" -}}
{{ include "flowtel.gateway.fullname" . }}.{{ .Release.Namespace }}.svc
{{- end }}

{{- define "flowtel.gateway.tlsSecret" -}}
{{ default (printf "%s-tls" (include "flowtel.gateway.fullname" .)) .Values.tls.gatewaySecret }}
{{- end }}
{{- define "flowtel.gateway.caSecret" -}}
{{ default (printf "%s-ca" (include "flowtel.gateway.fullname" .)) .Values.tls.caSecret }}
{{- end }}
{{- define "flowtel.node.caSecret" -}}
{{ default (printf "%s-ca" (include "flowtel.node.fullname" .)) .Values.tls.mtls.nodeCASecret }}
{{- end }}
{{- define "flowtel.node.tlsSecret" -}}
{{ default (printf "%s-tls" (include "flowtel.node.fullname" .)) .Values.tls.mtls.nodeSecret }}
{{- end }}

{{- define "flowtel.image" -}}
{{ .image.repository }}:{{ default .chart.AppVersion .image.tag }}
{{- end }}

{{/*
The node collector configuration: config/node.yaml (generated from
distributions/flowtel-node/config.yaml) with the chart's values applied. What
the file reads from the environment, node-daemonset.yaml sets.
*/}}
{{- define "flowtel.node.config" -}}
{{- $cfg := .Files.Get "config/node.yaml" | fromYaml -}}
{{- $_ := set $cfg.receivers "conntrack" (mustMergeOverwrite $cfg.receivers.conntrack (deepCopy .Values.node.conntrack)) -}}
{{- $_ := set $cfg.processors "k8s_flow" (mustMergeOverwrite $cfg.processors.k8s_flow (deepCopy .Values.node.k8sFlow)) -}}
{{- $_ := set $cfg.extensions.health_check "endpoint" (printf "0.0.0.0:%v" .Values.node.healthPort) -}}
{{- $_ := set (index $cfg.service.telemetry.metrics.readers 0).pull.exporter.prometheus "port" .Values.node.metricsPort -}}
{{- $lb := $cfg.exporters.load_balancing -}}
{{- if not .Values.tls.enabled }}
{{- $_ := set $lb.protocol.otlp "tls" (dict "insecure" true) -}}
{{- end }}
{{- if not (include "flowtel.nodeIdentity" .) }}
{{- /* No token: the gateway does not ask for one (nodeIdentity.enabled=false, or plaintext, which must not carry it). */ -}}
{{- $_ := unset $lb.protocol.otlp "auth" -}}
{{- $_ := unset $cfg.extensions "bearertokenauth" -}}
{{- $_ := set $cfg.service "extensions" (without $cfg.service.extensions "bearertokenauth") -}}
{{- end }}
{{- if eq .Values.gateway.resolver "dns" }}
{{- $_ := set $lb "resolver" (dict "dns" (dict "hostname" (printf "%s.%s.svc.%s" (include "flowtel.gateway.fullname" .) .Release.Namespace .Values.clusterDomain) "port" "4317")) -}}
{{- else if ne .Values.gateway.resolver "k8s" }}
{{- fail (printf "gateway.resolver: %q is not k8s or dns" .Values.gateway.resolver) -}}
{{- end }}
{{- toYaml (mustMergeOverwrite $cfg (deepCopy .Values.node.config)) }}
{{- end }}

{{/*
"true" when the gateway checks each node collector's Node (node_identity) from
its projected ServiceAccount token: nodeIdentity.enabled and TLS (a bearer
token is never sent in plaintext); "" otherwise.
*/}}
{{/*
The node collectors' storage directory on each Node (persistent sending queue and
conntrack checkpoint): node.storageHostPath when set; else the directory the
release's DaemonSet already mounts (an upgrade resumes from it, also from a chart
whose default was /var/lib/flowtel for every release); else one of its own,
/var/lib/flowtel/<namespace>/<release>, so two releases never share one (two
collectors cannot: each locks its files). helm template and client-side dry runs
cannot look the DaemonSet up and render the default.
*/}}
{{- define "flowtel.node.storageHostPath" -}}
{{- if .Values.node.storageHostPath -}}
{{ .Values.node.storageHostPath }}
{{- else -}}
{{- $path := printf "/var/lib/flowtel/%s/%s" .Release.Namespace .Release.Name -}}
{{- $ds := lookup "apps/v1" "DaemonSet" .Release.Namespace (include "flowtel.node.fullname" .) -}}
{{- range (dig "spec" "template" "spec" "volumes" list $ds) -}}
{{- if and (eq .name "queue") .hostPath -}}
{{- $path = .hostPath.path -}}
{{- end -}}
{{- end -}}
{{ $path }}
{{- end -}}
{{- end }}

{{- define "flowtel.nodeIdentity" -}}
{{- if and .Values.nodeIdentity.enabled .Values.tls.enabled }}true{{ end -}}
{{- end }}

{{/*
The gateway configuration: config/gateway.yaml (generated from
distributions/flowtel-gateway/config.yaml) with the chart's values applied:
TLS, flow_correlation and the enabled sinks in the logs pipeline.
*/}}
{{- define "flowtel.gateway.config" -}}
{{- $cfg := .Files.Get "config/gateway.yaml" | fromYaml -}}
{{- if not .Values.tls.enabled }}
{{- /* Plaintext: no tls block and no server_tls middleware, which would serve TLS. */ -}}
{{- $_ := unset $cfg.receivers.otlp.protocols.grpc "tls" -}}
{{- $_ := unset $cfg.receivers.otlp.protocols.grpc "middlewares" -}}
{{- $_ := unset $cfg.extensions "server_tls" -}}
{{- $_ := set $cfg.service "extensions" (without $cfg.service.extensions "server_tls") -}}
{{- end }}
{{- if and .Values.tls.enabled .Values.tls.provision }}
{{- /* The gateway makes and renews the certificates (the Role in gateway-certificates-rbac.yaml),
       in Secrets that belong to its ServiceAccount (gateway-statefulset.yaml): helm uninstall deletes them. */ -}}
{{- $_ := set $cfg.extensions "k8s_certificates" (dict "auth_type" "serviceAccount" "wait_for_files" (list "/etc/flowtel/tls/tls.crt" "/etc/flowtel/tls/tls.key") "gateway_name" (include "flowtel.gateway.fullname" .) "node_name" (include "flowtel.node.fullname" .) "flowstream_name" (include "flowtel.flowstream.fullname" .) "owner_service_account" (include "flowtel.gateway.fullname" .)) -}}
{{- $_ := set $cfg.service "extensions" (append $cfg.service.extensions "k8s_certificates") -}}
{{- end }}
{{- if not (include "flowtel.nodeIdentity" .) }}
{{- $_ := unset $cfg.processors "node_identity" -}}
{{- $_ := set $cfg.service.pipelines.logs "processors" (without $cfg.service.pipelines.logs.processors "node_identity") -}}
{{- end }}
{{- $_ := set $cfg.processors "flow_correlation" (deepCopy .Values.gateway.flowCorrelation) -}}
{{- $exporters := $cfg.exporters -}}
{{- $names := list -}}
{{- $s := .Values.sinks -}}
{{- if $s.clickhouse.enabled }}
{{- $_ := set $exporters "clickhouse_flows" (mustMergeOverwrite (dict "endpoint" $s.clickhouse.endpoint "database" $s.clickhouse.database "table" $s.clickhouse.table "create_schema" $s.clickhouse.createSchema) (deepCopy $s.clickhouse.config)) -}}
{{- $names = append $names "clickhouse_flows" -}}
{{- end }}
{{- if $s.ipfix.enabled }}
{{- $_ := set $exporters "ipfix" (mustMergeOverwrite (dict "endpoint" $s.ipfix.endpoint "transport" $s.ipfix.transport "record_layout" $s.ipfix.recordLayout) (deepCopy $s.ipfix.config)) -}}
{{- $names = append $names "ipfix" -}}
{{- end }}
{{- if $s.otlp.enabled }}
{{- $_ := set $exporters "otlp" (mustMergeOverwrite (dict "endpoint" $s.otlp.endpoint) (deepCopy $s.otlp.config)) -}}
{{- $names = append $names "otlp" -}}
{{- end }}
{{- $_ := set $exporters.debug "verbosity" $s.debug.verbosity -}}
{{- if .Values.flowStream.enabled }}
{{- /* The fan-in's certificate names its Service; with mTLS (the default) the
       gateway presents its own certificate, which the fan-in requires. */ -}}
{{- $fsTLS := dict "ca_file" "/etc/flowtel/tls/ca.crt" "server_name_override" (printf "%s.%s.svc" (include "flowtel.flowstream.fullname" .) .Release.Namespace) -}}
{{- if .Values.tls.mtls.enabled }}
{{- $_ := set $fsTLS "cert_file" "/etc/flowtel/tls/tls.crt" -}}
{{- $_ := set $fsTLS "key_file" "/etc/flowtel/tls/tls.key" -}}
{{- $_ := set $fsTLS "reload_interval" "1m" -}}
{{- end }}
{{- $_ := set $exporters "otlp/flowstream" (dict "endpoint" (printf "%s:4317" (include "flowtel.flowstream.fullname" .)) "compression" "zstd" "tls" $fsTLS) -}}
{{- $names = append $names "otlp/flowstream" -}}
{{- end }}
{{- if or $s.debug.enabled (empty $names) }}
{{- $names = append $names "debug" -}}
{{- end }}
{{- $_ := set $cfg.service.pipelines.logs "exporters" (append $names "signal_to_metrics") -}}
{{- with .Values.antreaAgents }}{{ if .enabled }}
{{- /* Unmodified Antrea agents export into the one logs pipeline, so their
       halves pair with each other and the node collectors' (receiver/antreaflowsreceiver).
       IPFIX over TLS only: no UDP beside TLS (it is neither encrypted nor authenticated).
       The compact form (decision D13), as the node collectors' records arrive: only
       flowtel's processors read them before flow_correlation. */ -}}
{{- $_ := set $cfg.receivers "antrea_flows" (dict
      "ipfix" (dict "endpoint" "0.0.0.0:4739" "transports" (list "tcp"))
      "grpc" (dict "endpoint" "0.0.0.0:14739")
      "tls" (dict "cert_file" "/etc/flowtel/antrea/tls.crt" "key_file" "/etc/flowtel/antrea/tls.key"
                  "client_ca_file" "/etc/flowtel/antrea/ca.crt" "reload_interval" "1m" "client_ca_file_reload" true)
      "kubernetes" (dict "auth_type" "serviceAccount")
      "encoding" "compact") -}}
{{- $_ := set $cfg.service.pipelines.logs "receivers" (append $cfg.service.pipelines.logs.receivers "antrea_flows") -}}
{{- end }}{{ end }}
{{- toYaml (mustMergeOverwrite $cfg (deepCopy .Values.gateway.config)) }}
{{- end }}

{{/*
The GOMEMLIMIT env entry of a collector container: the Go runtime's soft memory
limit at 55 % of the container's resources.limits.memory (docs/deploy.md, "Memory
and GC"), in KiB; nothing when the container has no memory limit. Takes
(dict "resources" <the container's resources> "what" <its values path>).
*/}}
{{- define "flowtel.goMemLimitEnv" -}}
{{- $q := "" -}}
{{- with .resources }}{{ with .limits }}{{ with .memory }}
{{- if kindIs "string" . }}{{ $q = . }}{{ else }}{{ $q = int64 . | toString }}{{ end }}
{{- end }}{{ end }}{{ end -}}
{{- if $q -}}
{{- if not (regexMatch "^[0-9]+(Ki|Mi|Gi|Ti|k|M|G|T)?$" $q) -}}
{{- fail (printf "%s.resources.limits.memory: %q is not a quantity the chart can read (GOMEMLIMIT is 55 %% of it); write a whole number of bytes, or of Ki, Mi, Gi, Ti, k, M, G or T" .what $q) -}}
{{- end -}}
{{- $unit := regexReplaceAll "^[0-9]+" $q "" -}}
{{- $bytesPer := dict "" 1 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 -}}
{{- $bytes := mul (regexReplaceAll "[^0-9]" $q "" | int64) (get $bytesPer $unit) -}}
# The Go runtime's soft memory limit: 55 % of {{ .what }}.resources.limits.memory.
- name: GOMEMLIMIT
  value: {{ printf "%dKiB" (div (mul $bytes 11) 20480) | quote }}
{{- end -}}
{{- end -}}
