{{/* Prefix of every object of this release. */}}
{{- define "locust.fullname" -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{/* Service the workers dial (port 5557); always ClusterIP. */}}
{{- define "locust.masterService" -}}
{{- printf "%s-master" (include "locust.fullname" .) -}}
{{- end -}}

{{/* Service of the web UI (port 8089); ClusterIP unless service.type says otherwise. */}}
{{- define "locust.webService" -}}
{{- printf "%s-web" (include "locust.fullname" .) -}}
{{- end -}}

{{- define "locust.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "locust.labels" -}}
{{ include "locust.selectorLabels" . }}
app.kubernetes.io/part-of: {{ .Values.partOf }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- if .Values.stack }}
sglab/stack: {{ .Values.stack }}
{{- end }}
{{- end -}}

{{/* Arm targets, read by the locustfile from the environment (also shown in the UI form). */}}
{{- define "locust.targetEnv" -}}
- name: SGLAB_BASELINE_URL
  value: {{ .Values.targets.baselineUrl | quote }}
- name: SGLAB_CANDIDATE_URL
  value: {{ .Values.targets.candidateUrl | quote }}
{{- end -}}

{{/* The token a worker shows the master (sglab/load/distributed.py), from the one Secret both read. */}}
{{- define "locust.workerTokenEnv" -}}
{{- if .Values.workerToken.existingSecret }}
- name: {{ .Values.workerToken.env }}
  valueFrom:
    secretKeyRef:
      name: {{ .Values.workerToken.existingSecret | quote }}
      key: {{ .Values.workerToken.secretKey | quote }}
{{- end }}
{{- end -}}

{{/* Non-root (the project image's user), nothing to escalate to, the runtime's seccomp profile. */}}
{{- define "locust.podSecurity" -}}
runAsNonRoot: true
runAsUser: {{ .Values.runAsUser }}
runAsGroup: {{ .Values.runAsUser }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "locust.containerSecurity" -}}
allowPrivilegeEscalation: false
capabilities:
  drop: ["ALL"]
readOnlyRootFilesystem: true
{{- end -}}

{{/* The root filesystem is read-only: /tmp (Python's tempfile) is the one writable place. */}}
{{- define "locust.volumeMounts" -}}
{{- if .Values.stackFile.configMap }}
- name: stack
  mountPath: {{ .Values.stackFile.mountPath | quote }}
  readOnly: true
{{- end }}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{- define "locust.volumes" -}}
{{- if .Values.stackFile.configMap }}
- name: stack
  configMap:
    name: {{ .Values.stackFile.configMap | quote }}
{{- end }}
- name: tmp
  emptyDir:
    sizeLimit: 1Gi
{{- end -}}

{{- define "locust.resources" -}}
requests:
  cpu: {{ .Values.resources.cpu | quote }}
  memory: {{ .Values.resources.memory | quote }}
limits:
  memory: {{ .Values.resources.memory | quote }}
{{- end -}}


{{/* Scheduling shared by master and workers: the stack's tolerations and priority class (a tainted GPU-only
     pool must still schedule them), an optional node selector, and the image pull secrets. */}}
{{- define "locust.placement" -}}
{{- with .Values.placement.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.placement.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.placement.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.placement.imagePullSecrets }}
imagePullSecrets:
  {{- range . }}
  - name: {{ . }}
  {{- end }}
{{- end }}
{{- end -}}
