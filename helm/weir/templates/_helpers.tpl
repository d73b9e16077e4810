{{/* Names, labels and the values derived from others (memory budget, grace period). */}}

{{- define "weir.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "weir.fullname" -}}
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

{{- define "weir.selectorLabels" -}}
app.kubernetes.io/name: {{ include "weir.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "weir.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "weir.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "weir.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "weir.secretName" -}}
{{- default (include "weir.fullname" .) .Values.upstream.existingSecret }}
{{- end }}

{{- define "weir.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "weir.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* A Kubernetes quantity of bytes ("1Gi", "512M", "1073741824") as an integer. */}}
{{- define "weir.bytes" -}}
{{- $v := toString . -}}
{{- $units := dict "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "k" 1000 "K" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 -}}
{{- $out := "" -}}
{{- range $suffix, $mult := $units -}}
{{- if and (not $out) (hasSuffix $suffix $v) -}}
{{- $n := trimSuffix $suffix $v -}}
{{- if not (regexMatch "^[0-9]+$" $n) -}}
{{- fail (printf "resources.limits.memory %q: use a whole number with a unit (e.g. 1536Mi)" $v) -}}
{{- end -}}
{{- $out = mul ($n | int64) $mult -}}
{{- end -}}
{{- end -}}
{{- if not $out -}}
{{- if not (regexMatch "^[0-9]+$" $v) -}}
{{- fail (printf "resources.limits.memory %q: use a whole number with a unit (e.g. 1536Mi)" $v) -}}
{{- end -}}
{{- $out = $v | int64 -}}
{{- end -}}
{{- $out -}}
{{- end }}

{{/* weir's memory budget: weir.memoryBudget, or a share of the container's memory limit. */}}
{{- define "weir.memoryBudget" -}}
{{- if .Values.weir.memoryBudget }}
{{- .Values.weir.memoryBudget | int64 }}
{{- else }}
{{- $limit := ((.Values.resources).limits).memory }}
{{- if not $limit }}
{{- fail "set resources.limits.memory (the memory budget is derived from it) or weir.memoryBudget" }}
{{- end }}
{{- div (mul (include "weir.bytes" $limit | int64) (.Values.weir.memoryBudgetPercent | int64)) 100 }}
{{- end }}
{{- end }}

{{/* The pod's grace period: the preStop wait, the drain, and time to close. */}}
{{- define "weir.gracePeriod" -}}
{{- add (.Values.preStopSeconds | int) (.Values.weir.drainSeconds | int) 15 }}
{{- end }}

{{/* A scalar as TOML: strings quoted, whole numbers without an exponent. */}}
{{- define "weir.tomlValue" -}}
{{- if kindIs "string" . }}{{ . | quote }}
{{- else if and (kindIs "float64" .) (eq (float64 (int64 .)) .) }}{{ int64 . }}
{{- else }}{{ . }}
{{- end }}
{{- end }}
