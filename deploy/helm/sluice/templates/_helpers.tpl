{{/* The chart's name, and the release's full name (at most 63 characters, a DNS label). */}}
{{- define "sluice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "sluice.fullname" -}}
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

{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sluice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "sluice.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "sluice.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "sluice.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sluice.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
sluice.terminationGracePeriod: the pod's terminationGracePeriodSeconds, longer than the drain
(shutdown.grace_period + shutdown.drain_timeout) so that Kubernetes does not kill a pod that
is still draining.
*/}}
{{- define "sluice.terminationGracePeriod" -}}
{{- $s := .Values.shutdown }}
{{- $drain := add (int $s.gracePeriodSeconds) (int $s.drainTimeoutSeconds) }}
{{- if kindIs "invalid" $s.terminationGracePeriodSeconds }}
{{- add $drain (int $s.terminationMarginSeconds) }}
{{- else if le (int $s.terminationGracePeriodSeconds) $drain }}
{{- fail (printf "shutdown.terminationGracePeriodSeconds (%d) must exceed shutdown.gracePeriodSeconds + shutdown.drainTimeoutSeconds (%d), or Kubernetes kills pods still draining" (int $s.terminationGracePeriodSeconds) $drain) }}
{{- else }}
{{- int $s.terminationGracePeriodSeconds }}
{{- end }}
{{- end }}

{{/*
sluice.config: sluice.yaml. The keys the chart owns (the listeners, the drain timing and
broker.url) come from their values; every other key from .Values.config.
*/}}
{{- define "sluice.config" -}}
{{- $cfg := deepCopy (.Values.config | default dict) }}
{{- range $key, $value := dict "listen" "ports.websocket" "admin_listen" "ports.admin" "shutdown" "shutdown" }}
{{- if hasKey $cfg $key }}
{{- fail (printf "config.%s: set %s instead (the chart points the probes, the Service and the grace period at it)" $key $value) }}
{{- end }}
{{- end }}
{{- $_ := set $cfg "listen" (printf ":%d" (int .Values.ports.websocket)) }}
{{- $_ := set $cfg "admin_listen" (printf ":%d" (int .Values.ports.admin)) }}
{{- $_ := set $cfg "shutdown" (dict "grace_period" (printf "%ds" (int .Values.shutdown.gracePeriodSeconds)) "drain_timeout" (printf "%ds" (int .Values.shutdown.drainTimeoutSeconds))) }}
{{- if .Values.broker.url }}
{{- $broker := get $cfg "broker" | default dict }}
{{- if hasKey $broker "url" }}
{{- fail "config.broker.url: set broker.url instead" }}
{{- end }}
{{- $_ := set $broker "url" .Values.broker.url }}
{{- $_ := set $cfg "broker" $broker }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}
