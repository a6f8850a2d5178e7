{{/* Name of every object of this release (the Service name is what clients dial). */}}
{{- define "sglang-server.fullname" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels that select this arm's pods; stable across upgrades. */}}
{{- define "sglang-server.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sglang-server.labels" -}}
{{ include "sglang-server.selectorLabels" . }}
app.kubernetes.io/component: server
app.kubernetes.io/part-of: {{ .Values.partOf }}
app.kubernetes.io/version: {{ include "sglang-server.imageTag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
sglab/arm: {{ .Values.arm }}
{{- if .Values.stack }}
sglab/stack: {{ .Values.stack }}
{{- end }}
{{- end -}}

{{- define "sglang-server.annotations" -}}
sglab/config-hash: {{ .Values.configHash | quote }}
{{- end -}}

{{/* What a sweep slot serves (the arm's name), on the objects but not the pod template: a slot whose server
     config is unchanged keeps its pod when only the arm's name changes (the confirmation of a carried leader). */}}
{{- define "sglang-server.identityLabels" -}}
{{- if .Values.armName }}
sglab/arm-name: {{ .Values.armLabel | quote }}
{{- end }}
{{- end -}}

{{- define "sglang-server.identityAnnotations" -}}
{{- if .Values.armName }}
sglab/arm-name: {{ .Values.armName | quote }}
{{- end }}
{{- end -}}

{{/* The image tag (what actually runs), as a label value. */}}
{{- define "sglang-server.imageTag" -}}
{{- $ref := .Values.image.name | splitList "@" | first | splitList "/" | last -}}
{{- if contains ":" $ref -}}
{{- $ref | splitList ":" | last | trunc 63 | trimSuffix "-" | trimSuffix "." | trimSuffix "_" -}}
{{- else -}}
latest
{{- end -}}
{{- end -}}
