"""A second, independent client: pulsar-flex (pure JavaScript, npm), on a small subset.

Needs ``node`` and ``npm``; pulsar-flex is installed with npm into a folder of
the test session (skipped, saying why, when that cannot be done).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.protocol.harness import Standalone, unique

pytestmark = pytest.mark.slow

PULSAR_FLEX = "pulsar-flex@1.1.1"

_SCRIPT = """
const { Producer, Consumer, logLevel } = require('pulsar-flex')
const [server, topic] = process.argv.slice(2)
const common = { topic, discoveryServers: [server], logLevel: logLevel.ERROR }
const producer = new Producer({ ...common, producerAccessMode: Producer.ACCESS_MODES.SHARED })
const consumer = new Consumer({
  ...common, subscription: 'flex', subType: Consumer.SUB_TYPES.SHARED,
  consumerName: 'flex', receiveQueueSize: 100,
})
const run = async () => {
  await producer.create()
  await consumer.subscribe()
  await producer.sendMessage({ payload: 'single', properties: { a: '1' } })
  await producer.sendBatch({
    messages: [{ payload: 'b0', properties: {} }, { payload: 'b1', properties: {} }],
  })
  const got = []
  await new Promise((resolve) => {
    consumer.run({
      onMessage: async ({ ack, message, properties }) => {
        got.push([message.toString(), properties])
        await ack()
        if (got.length === 3) resolve()
      },
      autoAck: false,
    })
    setTimeout(resolve, 10000)
  })
  await new Promise((resolve) => setTimeout(resolve, 500))
  console.log(JSON.stringify(got))
  process.exit(0)
}
run().catch((e) => { console.error('FAILED', e); process.exit(1) })
"""


@pytest.fixture(scope="module")
def pulsar_flex(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed for the pulsar-flex tests")
    folder = tmp_path_factory.mktemp("pulsar-flex")
    done = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder), PULSAR_FLEX],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        pytest.skip(f"npm could not install {PULSAR_FLEX}: {done.stderr.strip()[-300:]}")
    return folder


def test_pulsar_flex_produces_consumes_and_acknowledges(
    standalone: Standalone, pulsar_flex: Path
) -> None:
    topic = unique("flex")
    script = pulsar_flex / "flex.js"
    script.write_text(_SCRIPT)
    server = standalone.service_url.removeprefix("pulsar://")
    done = subprocess.run(
        ["node", str(script), server, topic],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=pulsar_flex,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert [payload for payload, _ in got] == ["single", "b0", "b1"]
    assert got[0][1] == {"a": "1"}
    with standalone.broker() as broker:
        parts = broker.analysis.analyze_backlog("admin", topic, "flex")
        stored = broker.analysis.entry_count("admin", topic)
    assert sum(part.result.messages for part in parts) == 0
    assert stored == 2  # one single message, one batch of two
