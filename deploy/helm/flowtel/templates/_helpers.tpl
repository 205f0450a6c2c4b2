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
{{- define "flowtel.node.tlsSecret" -}}
{{ default (printf "%s-tls" (include "flowtel.node.fullname" .)) .Values.tls.mtls.nodeSecret }}
{{- end }}

{{- define "flowtel.image" -}}
{{ .image.repository }}:{{ default .chart.AppVersion .image.tag }}
{{- end }}

{{/*
The node collector configuration: conntrack -> k8s_flow -> load_balancing on
flow.key to the gateway replicas, with the persistent queue.
*/}}
{{- define "flowtel.node.config" -}}
{{- $gw := include "flowtel.gateway.fullname" . -}}
{{- $conntrack := mustMergeOverwrite (dict "node_name" "${env:K8S_NODE_NAME}" "events" true "storage" "file_storage") (deepCopy .Values.node.conntrack) -}}
{{- $k8sFlow := mustMergeOverwrite (dict "node_name" "${env:K8S_NODE_NAME}") (deepCopy .Values.node.k8sFlow) -}}
{{- $otlp := dict "sending_queue" (dict "storage" "file_storage") -}}
{{- if .Values.tls.enabled }}
{{- $tls := dict "ca_file" "/etc/flowtel/gateway-ca/ca.crt" "server_name_override" (include "flowtel.gateway.tlsName" .) -}}
{{- if .Values.tls.mtls.enabled }}
{{- $_ := set $tls "cert_file" "/etc/flowtel/client-tls/tls.crt" -}}
{{- $_ := set $tls "key_file" "/etc/flowtel/client-tls/tls.key" -}}
{{- end }}
{{- $_ := set $otlp "tls" $tls -}}
{{- else }}
{{- $_ := set $otlp "tls" (dict "insecure" true) -}}
{{- end }}
{{- $resolver := dict -}}
{{- if eq .Values.gateway.resolver "k8s" }}
{{- $_ := set $resolver "k8s" (dict "service" (printf "%s.%s" $gw .Release.Namespace) "ports" (list 4317) "return_hostnames" true) -}}
{{- else if eq .Values.gateway.resolver "dns" }}
{{- $_ := set $resolver "dns" (dict "hostname" (printf "%s.%s.svc.%s" $gw .Release.Namespace .Values.clusterDomain) "port" "4317") -}}
{{- else }}
{{- fail (printf "gateway.resolver: %q is not k8s or dns" .Values.gateway.resolver) -}}
{{- end }}
{{- $cfg := dict
  "extensions" (dict
    "health_check" (dict "endpoint" (printf "0.0.0.0:%v" .Values.node.healthPort))
    "file_storage" (dict "directory" "/var/lib/flowtel" "create_directory" true))
  "receivers" (dict "conntrack" $conntrack)
  "processors" (dict
    "memory_limiter" (dict "check_interval" "1s" "limit_percentage" 80 "spike_limit_percentage" 20)
    "k8s_flow" $k8sFlow)
  "exporters" (dict "load_balancing" (dict
    "routing_key" "attributes"
    "routing_attributes" (list "flow.key")
    "protocol" (dict "otlp" $otlp)
    "resolver" $resolver))
  "service" (dict
    "telemetry" (dict "metrics" (dict "readers" (list (dict "pull" (dict "exporter" (dict "prometheus" (dict "host" "0.0.0.0" "port" .Values.node.metricsPort)))))))
    "extensions" (list "health_check" "file_storage")
    "pipelines" (dict "logs" (dict
      "receivers" (list "conntrack")
      "processors" (list "memory_limiter" "k8s_flow")
      "exporters" (list "load_balancing"))))
-}}
{{- toYaml (mustMergeOverwrite $cfg (deepCopy .Values.node.config)) }}
{{- end }}

{{/*
The gateway configuration: otlp -> flow_correlation -> the enabled sinks.
*/}}
{{- define "flowtel.gateway.config" -}}
{{- $grpc := dict "endpoint" "0.0.0.0:4317" -}}
{{- if .Values.tls.enabled }}
{{- $tls := dict "cert_file" "/etc/flowtel/tls/tls.crt" "key_file" "/etc/flowtel/tls/tls.key" -}}
{{- if .Values.tls.mtls.enabled }}
{{- $_ := set $tls "client_ca_file" "/etc/flowtel/tls/ca.crt" -}}
{{- end }}
{{- $_ := set $grpc "tls" $tls -}}
{{- end }}
{{- $exporters := dict -}}
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
{{- if .Values.flowStream.enabled }}
{{- $_ := set $exporters "otlp/flowstream" (dict "endpoint" (printf "%s:4317" (include "flowtel.flowstream.fullname" .)) "tls" (dict "ca_file" "/etc/flowtel/tls/ca.crt")) -}}
{{- $names = append $names "otlp/flowstream" -}}
{{- end }}
{{- if or $s.debug.enabled (empty $names) }}
{{- $_ := set $exporters "debug" (dict "verbosity" $s.debug.verbosity) -}}
{{- $names = append $names "debug" -}}
{{- end }}
{{- $cfg := dict
  "extensions" (dict "health_check" (dict "endpoint" "0.0.0.0:13133"))
  "receivers" (dict "otlp" (dict "protocols" (dict "grpc" $grpc)))
  "processors" (dict
    "memory_limiter" (dict "check_interval" "1s" "limit_percentage" 80 "spike_limit_percentage" 20)
    "flow_correlation" (deepCopy .Values.gateway.flowCorrelation))
  "exporters" $exporters
  "service" (dict
    "telemetry" (dict "metrics" (dict "readers" (list (dict "pull" (dict "exporter" (dict "prometheus" (dict "host" "0.0.0.0" "port" 8888)))))))
    "extensions" (list "health_check")
    "pipelines" (dict "logs" (dict
      "receivers" (list "otlp")
      "processors" (list "memory_limiter" "flow_correlation")
      "exporters" $names)))
-}}
{{- toYaml (mustMergeOverwrite $cfg (deepCopy .Values.gateway.config)) }}
{{- end }}
