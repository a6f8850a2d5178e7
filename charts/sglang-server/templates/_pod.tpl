{{/* The pod template of one SGLang server process (a Deployment's pod, or each pod of a LeaderWorkerSet group). */}}
{{- define "sglang-server.podTemplate" -}}
metadata:
  labels:
    {{- include "sglang-server.labels" . | nindent 4 }}
    {{- with .Values.serving.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    {{- include "sglang-server.annotations" . | nindent 4 }}
    {{- if and .Values.rdma.enabled .Values.rdma.networks }}
    # Multus attaches the RDMA interfaces (NetworkAttachmentDefinitions) beside the cluster network.
    k8s.v1.cni.cncf.io/networks: {{ join "," .Values.rdma.networks | quote }}
    {{- end }}
    {{- with .Values.serving.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  # Service links would inject SGLANG_*-prefixed variables (from Service names) into the server's env.
  enableServiceLinks: false
  # The server runs model code (--trust-remote-code) and never calls the Kubernetes API.
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: {{ .Values.termination.gracePeriodSeconds }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- range . }}
    - name: {{ . }}
    {{- end }}
  {{- end }}
  {{- if and .Values.rdma.enabled .Values.rdma.hostNetwork }}
  # The node's own RDMA interfaces (placement.rdma.host-network); cluster DNS still resolves Services.
  hostNetwork: true
  dnsPolicy: ClusterFirstWithHostNet
  {{- end }}
  securityContext:
    {{- with .Values.security.runAsUser }}
    runAsNonRoot: true
    runAsUser: {{ . }}
    runAsGroup: {{ . }}
    {{- end }}
    seccompProfile:
      type: RuntimeDefault
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- with .Values.runtimeClassName }}
  runtimeClassName: {{ . }}
  {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if .Values.antiAffinity.enabled }}
  affinity:
    podAntiAffinity:
      # Whole-node isolation: no other server of this pair (stack) on the same node.
      requiredDuringSchedulingIgnoredDuringExecution:
        - topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              app.kubernetes.io/name: {{ .Chart.Name }}
              app.kubernetes.io/part-of: {{ .Values.partOf }}
              {{- if .Values.stack }}
              sglab/stack: {{ .Values.stack }}
              {{- end }}
  {{- end }}
  containers:
    - name: server
      image: {{ .Values.image.name | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      command:
        {{- toYaml .Values.command | nindent 8 }}
      args:
        {{- toYaml .Values.args | nindent 8 }}
      {{- if gt (int .Values.termination.preStopDrainSeconds) 0 }}
      # Keep serving while the endpoints and the gateway drop this pod; SIGTERM comes after.
      lifecycle:
        preStop:
          sleep:
            seconds: {{ .Values.termination.preStopDrainSeconds }}
      {{- end }}
      securityContext:
        allowPrivilegeEscalation: false
        capabilities:
          drop: ["ALL"]
          {{- if .Values.rdma.enabled }}
          # Registering GPU and host memory with the NIC needs an unlimited memlock; nothing else is added.
          add: ["IPC_LOCK"]
          {{- end }}
        readOnlyRootFilesystem: {{ .Values.security.readOnlyRootFilesystem }}
        seccompProfile:
          type: RuntimeDefault
      ports:
        - name: http
          containerPort: {{ .Values.port }}
          protocol: TCP
      {{- if or .Values.env .Values.secretEnv .Values.hfCache.enabled }}
      env:
        {{- if .Values.hfCache.enabled }}
        # Hub downloads land on the shared cache claim, not in the pod.
        - name: HF_HUB_CACHE
          value: {{ .Values.hfCache.mountPath | quote }}
        {{- end }}
        {{- range .Values.env }}
        - name: {{ .name }}
          value: {{ .value | quote }}
        {{- end }}
        {{- range .Values.secretEnv }}
        - name: {{ .name }}
          valueFrom:
            secretKeyRef:
              name: {{ .secretName }}
              key: {{ .secretKey }}
        {{- end }}
      {{- end }}
      {{- $requests := dict }}
      {{- $limits := dict }}
      {{- if .Values.resources.cpu }}{{ $_ := set $requests "cpu" .Values.resources.cpu }}{{ end }}
      {{- if .Values.resources.cpuLimit }}{{ $_ := set $limits "cpu" .Values.resources.cpuLimit }}{{ end }}
      {{- if .Values.resources.memory }}
      {{- $_ := set $requests "memory" .Values.resources.memory }}
      {{- $_ := set $limits "memory" .Values.resources.memory }}
      {{- end }}
      {{- with .Values.security.ephemeralStorage }}{{ $_ := set $requests "ephemeral-storage" . }}{{ end }}
      {{- if gt (int .Values.gpus) 0 }}
      {{- $_ := set $limits "nvidia.com/gpu" (int .Values.gpus) }}
      {{- $_ := set $requests "nvidia.com/gpu" (int .Values.gpus) }}
      {{- end }}
      {{- if and .Values.rdma.enabled .Values.rdma.resource }}
      {{- $_ := set $limits .Values.rdma.resource (int .Values.rdma.count) }}
      {{- $_ := set $requests .Values.rdma.resource (int .Values.rdma.count) }}
      {{- end }}
      {{- if or $requests $limits }}
      resources:
        {{- with $requests }}
        requests:
          {{- toYaml . | nindent 10 }}
        {{- end }}
        {{- with $limits }}
        limits:
          {{- toYaml . | nindent 10 }}
        {{- end }}
      {{- end }}
      # Loading a very large model can take tens of minutes: the startup probe allows
      # startupFailureThreshold x periodSeconds before liveness takes over.
      startupProbe:
        httpGet:
          path: {{ .Values.probes.livenessPath }}
          port: http
        periodSeconds: {{ .Values.probes.periodSeconds }}
        timeoutSeconds: {{ .Values.probes.timeoutSeconds }}
        failureThreshold: {{ .Values.probes.startupFailureThreshold }}
      readinessProbe:
        httpGet:
          path: {{ .Values.probes.readinessPath }}
          port: http
        periodSeconds: {{ .Values.probes.periodSeconds }}
        timeoutSeconds: {{ .Values.probes.timeoutSeconds }}
        failureThreshold: 3
      livenessProbe:
        httpGet:
          path: {{ .Values.probes.livenessPath }}
          port: http
        periodSeconds: {{ .Values.probes.periodSeconds }}
        timeoutSeconds: {{ .Values.probes.timeoutSeconds }}
        failureThreshold: {{ .Values.probes.livenessFailureThreshold }}
      volumeMounts:
        - name: dshm
          mountPath: /dev/shm
        {{- range $i, $path := .Values.security.writablePaths }}
        - name: writable-{{ $i }}
          mountPath: {{ $path | quote }}
        {{- end }}
        {{- if ne .Values.modelVolume.kind "none" }}
        - name: model
          mountPath: {{ .Values.modelVolume.mountPath }}
          readOnly: true
        {{- end }}
        {{- if .Values.hfCache.enabled }}
        - name: hf-cache
          mountPath: {{ .Values.hfCache.mountPath | quote }}
        {{- end }}
        {{- if and .Values.rdma.enabled .Values.rdma.hostNetwork }}
        - name: infiniband
          mountPath: /dev/infiniband
        {{- end }}
  volumes:
    # NCCL and SGLang's workers talk through shared memory; the container default (64Mi) is far too small.
    - name: dshm
      emptyDir:
        medium: Memory
        sizeLimit: {{ .Values.shmSize }}
    # Where SGLang writes on a read-only root: /tmp (ZMQ ipc sockets, temp files) and the JIT/model-code
    # caches (Triton, torch compile, FlashInfer, HF modules); see docs/deploy.md.
    {{- range $i, $path := .Values.security.writablePaths }}
    - name: writable-{{ $i }}
      emptyDir:
        sizeLimit: {{ $.Values.security.writableSizeLimit }}
    {{- end }}
    {{- if eq .Values.modelVolume.kind "hostPath" }}
    - name: model
      hostPath:
        path: {{ .Values.modelVolume.hostPath }}
        type: Directory
    {{- else if eq .Values.modelVolume.kind "pvc" }}
    - name: model
      persistentVolumeClaim:
        claimName: {{ .Values.modelVolume.claimName }}
        readOnly: true
    {{- end }}
    {{- if .Values.hfCache.enabled }}
    - name: hf-cache
      persistentVolumeClaim:
        claimName: {{ .Values.hfCache.claimName }}
    {{- end }}
    {{- if and .Values.rdma.enabled .Values.rdma.hostNetwork }}
    # With the host's network the RDMA devices come from the node (no device plugin hands them to the pod).
    - name: infiniband
      hostPath:
        path: /dev/infiniband
        type: Directory
    {{- end }}
{{- end -}}
