"""A TF_CONFIG worker: prints its place in the cluster, then trains if TensorFlow is there.

GPU Hive's TensorFlow template starts this once per host with TF_CONFIG set to
{"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", "index": i}}.
With TensorFlow installed, MultiWorkerMirroredStrategy reads TF_CONFIG and the workers train
a tiny Keras model together; without it, the script shows what each worker was told.
"""

import json
import os
import sys


def main() -> int:
    config = json.loads(os.environ["TF_CONFIG"])
    workers = config["cluster"]["worker"]
    index = config["task"]["index"]
    print(f"worker {index} of {len(workers)}: listening on {workers[index]}", flush=True)
    print(f"cluster: {', '.join(workers)}", flush=True)
    try:
        import tensorflow as tf
    except ImportError:
        print(f"worker {index} finished (TensorFlow is not installed: nothing trained)")
        return 0
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(1,))])
        model.compile(optimizer="sgd", loss="mse")
    x = tf.random.uniform((256, 1))
    model.fit(x, 3 * x + 1, epochs=3, batch_size=32, verbose=2)
    print(f"worker {index} finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
