"""HuggingFace transformers: ``ModelOutput`` classes under stable treeclass names.

transformers registers every ``ModelOutput`` subclass with torch's pytree under its module
path. These tests give such classes (one of our own, and transformers' own BERT output) a
treeclass name with ``override=True``, check that rebuilt objects are fully working, and
export a tiny randomly initialised ``BertModel`` (nothing is downloaded), save it, and load it
in a fresh process where the output class lives in a module of a different name.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from _subproc import FRAMEWORKS, report_in

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pt = pytest.importorskip("torch.utils._pytree")

import treeclass as tc  # noqa: E402
import treeclass.torch as tct  # noqa: E402
from treeclass._core.fields import describe  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.transformers]

ModelOutput = transformers.utils.ModelOutput


def own_output_class() -> type:
    @dataclasses.dataclass
    class MyOutput(ModelOutput):
        last_hidden_state: Any = None
        pooled: Any = None
        attentions: Any = None

    return MyOutput


def test_transformers_registers_model_outputs_itself() -> None:
    MyOutput = own_output_class()
    sd = pt.SUPPORTED_SERIALIZED_TYPES[MyOutput]
    assert sd.serialized_type_name == f"{__name__}.MyOutput"


def torch_state(cls: type) -> tuple[Any, ...]:
    """What torch's Python registry holds for ``cls``."""
    names = frozenset(n for n, c in pt.SERIALIZED_TYPE_TO_PYTHON_TYPE.items() if c is cls)
    return (pt.SUPPORTED_NODES.get(cls), pt.SUPPORTED_SERIALIZED_TYPES.get(cls), names)


def test_model_output_needs_override(uname: str) -> None:
    MyOutput = own_output_class()
    before = torch_state(MyOutput)
    with pytest.raises(
        tc.RegistrationError,
        match=rf"MyOutput is already registered with PyTorch's pytree with "
        rf"serialized_type_name='{__name__}\.MyOutput'.*transformers.*override=True",
    ):
        tc.register_dataclass(MyOutput, name=uname)
    assert torch_state(MyOutput) == before
    assert not tc.is_registered(MyOutput)


def test_override_and_rebuilt_output_is_fully_working(uname: str) -> None:
    MyOutput = own_output_class()
    tc.register_dataclass(MyOutput, name=uname, override=True)
    assert describe(MyOutput).rebuild == "protocol"
    assert pt.SUPPORTED_SERIALIZED_TYPES[MyOutput].serialized_type_name == uname
    assert f"{__name__}.MyOutput" not in pt.SERIALIZED_TYPE_TO_PYTHON_TYPE
    # transformers' own check on every new instance does not re-register the class.
    hidden, pooled = torch.ones(1, 2, 3), torch.zeros(1, 3)
    out = MyOutput(last_hidden_state=hidden, pooled=pooled)
    cx = pytest.importorskip("torch.utils._cxx_pytree")
    rebuilt = [
        pt.tree_unflatten(*pt.tree_flatten(out)),
        cx.tree_unflatten(*cx.tree_flatten(out)),
        tc.tree_unflatten(*reversed(tc.tree_flatten(out))),
    ]
    for r in rebuilt:
        assert type(r) is MyOutput
        assert r["last_hidden_state"] is hidden and r["pooled"] is pooled
        assert r.last_hidden_state is hidden and r.attentions is None
        assert list(r.keys()) == ["last_hidden_state", "pooled"]
        assert r.to_tuple() == (hidden, pooled)
        assert r[1] is pooled
        assert "attentions" not in r
    spec = pt.tree_structure(out)
    assert spec.context == (("attentions",),)
    assert pt.treespec_loads(pt.treespec_dumps(spec)) == spec
    paths = [pt.keystr(p) for p, _ in pt.tree_flatten_with_path(out)[0]]
    assert paths == [".last_hidden_state", ".pooled"]


def test_pytree_dataclass_on_a_model_output(uname: str) -> None:
    @tc.pytree_dataclass(name=uname, override=True)
    class Decorated(ModelOutput):
        logits: Any = None
        loss: Any = None

    assert dataclasses.is_dataclass(Decorated)
    out = pt.tree_unflatten([torch.ones(2)], pt.tree_structure(Decorated(logits=torch.ones(2))))
    assert list(out.keys()) == ["logits"] and out.loss is None
    assert pt.SUPPORTED_SERIALIZED_TYPES[Decorated].serialized_type_name == uname


OWN = """
import dataclasses, typing
import torch
import treeclass as tc
from transformers import BertConfig, BertModel
from transformers.modeling_outputs import BaseModelOutputWithPoolingAndCrossAttentions
from transformers.utils import ModelOutput

PREFIX = {prefix!r}
tc.register_dataclass(
    BaseModelOutputWithPoolingAndCrossAttentions, name=PREFIX + ".BertOutput", override=True
)

@tc.pytree_dataclass(name=PREFIX + ".EncoderOutput", override=True)
class EncoderOutput(ModelOutput):
    last_hidden_state: typing.Optional[torch.Tensor] = None
    pooled: typing.Optional[torch.Tensor] = None
    attentions: typing.Optional[typing.Tuple[torch.Tensor, ...]] = None
"""

MAKER = """
def tiny_bert():
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=37, max_position_embeddings=64,
    )
    return BertModel(config).eval()

class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bert = tiny_bert()

    def forward(self, input_ids):
        out = self.bert(input_ids)
        return EncoderOutput(last_hidden_state=out.last_hidden_state, pooled=out.pooler_output)
"""


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("hf_defs")
    tag = uuid.uuid4().hex[:8]
    module = f"tc_hf_export_{tag}"
    prefix = f"tests.hf.{tag}"
    (folder / f"{module}.py").write_text(OWN.format(prefix=prefix) + MAKER)
    # The loading process defines the same classes in a module of another name.
    (folder / f"tc_hf_elsewhere_{tag}.py").write_text(OWN.format(prefix=prefix))
    sys.path.insert(0, str(folder))
    try:
        mod = importlib.import_module(module)
    finally:
        sys.path.remove(str(folder))
    mod.FOLDER = folder
    mod.ELSEWHERE = f"tc_hf_elsewhere_{tag}"
    return mod


FRESH = """
import json, sys
import torch
import treeclass as tc
import treeclass.torch as tct

folder, module, encoder_file, bert_file, io_file = sys.argv[1:]
sys.path.insert(0, folder)
defs = __import__(module)  # only the module defining the classes, under another name
from transformers.modeling_outputs import BaseModelOutputWithPoolingAndCrossAttentions as BO

ids, expected = torch.load(io_file)
report = {}
out = tct.load(encoder_file).module()(ids)
report["encoder"] = {
    "type": type(out) is defs.EncoderOutput,
    "module": type(out).__module__,
    "item": bool(torch.allclose(out["last_hidden_state"], expected[0])),
    "to_tuple": len(out.to_tuple()) == 2 and bool(torch.allclose(out.to_tuple()[1], expected[1])),
    "keys": list(out.keys()),
    "attentions": out.attentions is None,
}
out = torch.export.load(bert_file).module()(ids)
report["bert"] = {
    "type": type(out) is BO,
    "item": bool(torch.allclose(out["pooler_output"], expected[1])),
    "keys": list(out.keys()),
}
print(json.dumps(report))
"""


@pytest.mark.slow
def test_tiny_bert_export_save_load_in_module_of_another_name(own: Any, tmp_path: Path) -> None:
    encoder = own.Encoder()
    ids = torch.randint(0, 99, (1, 7))
    ep = torch.export.export(encoder, (ids,))
    out = ep.module()(ids)
    assert type(out) is own.EncoderOutput
    assert list(out.keys()) == ["last_hidden_state", "pooled"] and out.attentions is None
    eager = encoder(ids)
    torch.testing.assert_close(out["pooled"], eager["pooled"])

    bert_ep = torch.export.export(encoder.bert, (ids,))
    bert_out = bert_ep.module()(ids)
    assert type(bert_out).__name__ == "BaseModelOutputWithPoolingAndCrossAttentions"
    assert list(bert_out.keys()) == ["last_hidden_state", "pooler_output"]
    out_type = bert_ep.call_spec.out_spec.type
    assert pt.SUPPORTED_SERIALIZED_TYPES[out_type].serialized_type_name.endswith(".BertOutput")

    tct.save(ep, tmp_path / "encoder.pt2")
    torch.export.save(bert_ep, tmp_path / "bert.pt2")
    torch.save((ids, (eager.last_hidden_state, eager.pooled)), tmp_path / "io.pt")
    report = report_in(
        tmp_path,
        FRESH,
        str(own.FOLDER),
        own.ELSEWHERE,
        str(tmp_path / "encoder.pt2"),
        str(tmp_path / "bert.pt2"),
        str(tmp_path / "io.pt"),
        preload=FRAMEWORKS,
    )
    assert report["encoder"] == {
        "type": True,
        "module": own.ELSEWHERE,
        "item": True,
        "to_tuple": True,
        "keys": ["last_hidden_state", "pooled"],
        "attentions": True,
    }
    assert report["bert"] == {
        "type": True,
        "item": True,
        "keys": ["last_hidden_state", "pooler_output"],
    }
