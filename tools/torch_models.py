"""torch_models.py: hand-written PyTorch models for the families torchvision
lacks, exported by tools/export_torch.py (docs/zoo.md, graphs/real/README.md).

Every model is plain nn.Module code with static shapes (fake-tensor tracing
cannot follow data-dependent shapes): the MoE layer routes tokens with the
dense dispatch and combine tensors of GShard/Switch (one-hot positions within
a fixed expert capacity), not with gathers of a data-dependent size.

Families: GPT-style decoder LMs, an MoE decoder LM, a BERT-style encoder
(masked-LM head), LSTM/GRU models (stacked, bidirectional), a GRU seq2seq with
attention, DLRM and wide & deep recommenders, a U-Net, a Conformer and a
wav2vec-style speech encoder. Sizes are constructor arguments; the export
table in export_torch.py names each configuration.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class _RNN(nn.RNNBase):
    """nn.LSTM / nn.GRU reading their weights by name at every call: the
    cached _flat_weights would bypass functional_call's substituted (fake)
    tensors."""

    def forward(self, x):
        n = self.num_layers * (2 if self.bidirectional else 1)
        h = x.new_zeros(n, x.shape[0] if self.batch_first else x.shape[1], self.hidden_size)
        weights = [getattr(self, w) for w in self._flat_weights_names]
        if self.mode == "LSTM":
            out = torch._VF.lstm(x, (h, h), weights, self.bias, self.num_layers, self.dropout, self.training,
                                 self.bidirectional, self.batch_first)
        else:
            out = torch._VF.gru(x, h, weights, self.bias, self.num_layers, self.dropout, self.training,
                                self.bidirectional, self.batch_first)
        return out[0], out[1:]


class LSTM(_RNN):
    def __init__(self, *args, **kw):
        super().__init__("LSTM", *args, **kw)


class GRU(_RNN):
    def __init__(self, *args, **kw):
        super().__init__("GRU", *args, **kw)


# ---- attention blocks -------------------------------------------------------------------
class SelfAttention(nn.Module):
    """Multi-head self-attention written out (qkv projection, scores, mask, softmax, context)."""

    def __init__(self, d, heads, causal):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):  # (B, T, d)
        B, T, D = x.shape
        H = self.heads
        q, k, v = self.qkv(x).split(D, dim=2)
        q, k, v = (t.reshape(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D // H))
        if self.causal:
            mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
            att = att.masked_fill(mask, float("-inf"))
        y = torch.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, D))


class MLP(nn.Module):
    def __init__(self, d, hidden, act=F.gelu):
        super().__init__()
        self.fc, self.out, self.act = nn.Linear(d, hidden), nn.Linear(hidden, d), act

    def forward(self, x):
        return self.out(self.act(self.fc(x)))


class MoE(nn.Module):
    """Top-k gated mixture of experts with a fixed capacity per expert
    (GShard/Switch dense dispatch): tokens past an expert's capacity are
    dropped (they pass through the residual), each expert is its own MLP."""

    def __init__(self, d, hidden, experts, k=2, capacity_factor=1.25):
        super().__init__()
        self.k, self.cf = k, capacity_factor
        self.gate = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList([MLP(d, hidden) for _ in range(experts)])

    def forward(self, x):
        B, T, D = x.shape
        E, N = len(self.experts), B * T
        C = max(1, int(math.ceil(self.k * N / E * self.cf)))
        t = x.reshape(N, D)
        probs = torch.softmax(self.gate(t), dim=-1)  # (N, E)
        topv, topi = probs.topk(self.k, dim=-1)  # (N, k)
        # one-hot by comparison: F.one_hot reads the indices' range (data-dependent)
        mask = (topi.unsqueeze(-1) == torch.arange(E)).to(x.dtype)  # (N, k, E)
        # position of each (token, choice) in its expert's buffer: first choices first
        flat = mask.transpose(0, 1).reshape(self.k * N, E)
        pos = (torch.cumsum(flat, dim=0) - 1.0).reshape(self.k, N, E).transpose(0, 1)  # (N, k, E)
        keep = mask * (pos < C).to(x.dtype)
        slot = ((pos * keep).sum(-1).unsqueeze(-1) == torch.arange(C)).to(x.dtype)  # (N, k, C)
        dispatch = torch.einsum("nke,nkc->nec", keep, slot)  # (N, E, C)
        combine = torch.einsum("nke,nkc->nec", keep * topv.unsqueeze(-1), slot)
        xin = torch.einsum("nec,nd->ecd", dispatch, t)  # (E, C, D)
        out = torch.stack([e(xin[i]) for i, e in enumerate(self.experts)])  # (E, C, D)
        return torch.einsum("nec,ecd->nd", combine, out).reshape(B, T, D)


class Block(nn.Module):
    """Pre-norm Transformer block (GPT-2 / ViT style); ffn an MLP or an MoE."""

    def __init__(self, d, heads, causal, ffn):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = SelfAttention(d, heads, causal)
        self.ffn = ffn

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.ffn(self.ln2(x))


class GPT(nn.Module):
    """GPT-2-style decoder LM: token + learned position embeddings, pre-norm
    causal blocks, final norm, untied LM head. moe_every > 0 makes every
    moe_every-th block's MLP a mixture of `experts` experts."""

    def __init__(self, vocab, d, layers, heads, ctx, moe_every=0, experts=8, k=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList([
            Block(d, heads, True, MoE(d, 4 * d, experts, k) if moe_every and i % moe_every == moe_every - 1
                  else MLP(d, 4 * d)) for i in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):  # (B, T)
        T = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(T))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


def _rope(x):
    """rotary position embedding of (B, H, T, hd), the angles computed in the step (sin, cos)"""
    T, hd = x.shape[-2], x.shape[-1]
    ang = torch.outer(torch.arange(T).float(), 1.0 / 10000 ** (torch.arange(0, hd, 2).float() / hd))
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)


class LlamaBlock(nn.Module):
    """pre-RMSNorm block: grouped-query causal attention with rotary positions (kv_heads key/value
    heads, each shared by heads / kv_heads query heads: repeat_interleave), SwiGLU MLP"""

    def __init__(self, d, heads, kv_heads, hidden):
        super().__init__()
        self.h, self.kv, self.hd = heads, kv_heads, d // heads
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.v = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
        self.gate, self.up = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        B, T, D = x.shape
        y = self.n1(x)
        q = _rope(self.q(y).view(B, T, self.h, self.hd).transpose(1, 2))
        k = _rope(self.k(y).view(B, T, self.kv, self.hd).transpose(1, 2))
        v = self.v(y).view(B, T, self.kv, self.hd).transpose(1, 2)
        k, v = k.repeat_interleave(self.h // self.kv, dim=1), v.repeat_interleave(self.h // self.kv, dim=1)
        a = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
        a = a.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf")).softmax(-1)
        x = x + self.o((a @ v).transpose(1, 2).reshape(B, T, D))
        y = self.n2(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


class Llama(nn.Module):
    """Llama-style decoder LM: token embeddings, LlamaBlocks, final RMSNorm, untied LM head"""

    def __init__(self, vocab, d, layers, heads, kv_heads, hidden):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([LlamaBlock(d, heads, kv_heads, hidden) for _ in range(layers)])
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):  # (B, T)
        x = self.tok(ids)
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x))


class BERT(nn.Module):
    """BERT-style encoder: token, position and segment embeddings, post-norm
    blocks (nn.TransformerEncoderLayer, GELU), masked-LM head (dense, GELU,
    norm, vocabulary projection) over every position."""

    def __init__(self, vocab, d, layers, heads, ctx):
        super().__init__()
        self.tok, self.pos, self.seg = nn.Embedding(vocab, d), nn.Embedding(ctx, d), nn.Embedding(2, d)
        self.ln = nn.LayerNorm(d)
        self.layers = nn.ModuleList([nn.TransformerEncoderLayer(d, heads, 4 * d, 0.1, F.gelu, batch_first=True)
                                     for _ in range(layers)])
        self.mlm = nn.Linear(d, d)
        self.mlm_ln = nn.LayerNorm(d)
        self.decoder = nn.Linear(d, vocab)

    def forward(self, ids):
        B, T = ids.shape
        x = self.ln(self.tok(ids) + self.pos(torch.arange(T)) + self.seg(torch.zeros(B, T, dtype=torch.long)))
        for layer in self.layers:
            x = layer(x)
        return self.decoder(self.mlm_ln(F.gelu(self.mlm(x))))


# ---- recurrent models ----------------------------------------------------------------------
class RNNClassifier(nn.Module):
    """Embedding, a stacked (optionally bidirectional) LSTM or GRU, mean over
    time, classifier: a sentence classifier."""

    def __init__(self, vocab, d, hidden, layers, bidirectional, classes=5, cell="lstm"):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        rnn = LSTM if cell == "lstm" else GRU
        self.rnn = rnn(d, hidden, layers, bidirectional=bidirectional)
        self.fc = nn.Linear(hidden * (2 if bidirectional else 1), classes)

    def forward(self, ids):  # (T, B)
        out, _ = self.rnn(self.emb(ids))
        return self.fc(out.mean(0))


class RNNTagger(nn.Module):
    """Embedding, stacked bidirectional LSTM/GRU, per-token classifier (tagging)."""

    def __init__(self, vocab, d, hidden, layers, tags=20, cell="lstm"):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        rnn = LSTM if cell == "lstm" else GRU
        self.rnn = rnn(d, hidden, layers, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, tags)

    def forward(self, ids):
        out, _ = self.rnn(self.emb(ids))
        return self.fc(out)


class RNNLM(nn.Module):
    """Word-level LM over a stacked LSTM or GRU."""

    def __init__(self, vocab, hidden, layers, cell="gru"):
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.rnn = (LSTM if cell == "lstm" else GRU)(hidden, hidden, layers)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, ids):
        out, _ = self.rnn(self.emb(ids))
        return self.out(out)


class GRUSeq2Seq(nn.Module):
    """Bahdanau-style translation model: bidirectional GRU encoder, GRU-cell
    decoder with additive attention recomputed at every target step."""

    def __init__(self, vocab, hidden):
        super().__init__()
        self.src_emb, self.tgt_emb = nn.Embedding(vocab, hidden), nn.Embedding(vocab, hidden)
        self.enc = GRU(hidden, hidden, 1, bidirectional=True)
        self.bridge = nn.Linear(2 * hidden, hidden)
        self.keys = nn.Linear(2 * hidden, hidden, bias=False)
        self.query = nn.Linear(hidden, hidden, bias=False)
        self.v = nn.Linear(hidden, 1, bias=False)
        self.dec = nn.GRUCell(3 * hidden, hidden)
        self.out = nn.Linear(3 * hidden, vocab)

    def forward(self, src, tgt):
        mem, _ = self.enc(self.src_emb(src))  # (S, B, 2H)
        keys = self.keys(mem)
        h = torch.tanh(self.bridge(mem.mean(0)))
        outs = []
        for x in self.tgt_emb(tgt).unbind(0):
            a = torch.softmax(self.v(torch.tanh(keys + self.query(h))).squeeze(2), 0)  # (S, B)
            ctx = (a.unsqueeze(2) * mem).sum(0)
            h = self.dec(torch.cat([x, ctx], 1), h)
            outs.append(torch.cat([h, ctx], 1))
        return self.out(torch.stack(outs))


# ---- recommenders ------------------------------------------------------------------------------
def _mlp(sizes, last_act=True):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if last_act or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    """DLRM (Naumov et al. 2019): bottom MLP over dense features, one
    embedding table per sparse feature (one id per feature and sample),
    pairwise dot-product interaction, top MLP, click logit."""

    def __init__(self, dense, tables, dim, bottom, top):
        super().__init__()
        self.bottom = _mlp([dense] + bottom + [dim])
        # uninitialised weights: tracing never reads them, and Criteo-sized tables
        # would otherwise fill gigabytes of memory with random numbers
        self.emb = nn.ModuleList([nn.Embedding(rows, dim, _weight=torch.empty(rows, dim)) for rows in tables])
        f = len(tables) + 1
        self.register_buffer("li", torch.tensor([i for i in range(f) for j in range(i)], dtype=torch.long))
        self.register_buffer("lj", torch.tensor([j for i in range(f) for j in range(i)], dtype=torch.long))
        self.top = _mlp([dim + f * (f - 1) // 2] + top + [1], last_act=False)

    def forward(self, dense, sparse):  # (B, dense), (B, tables)
        x = self.bottom(dense)
        z = torch.stack([x] + [e(sparse[:, i]) for i, e in enumerate(self.emb)], 1)  # (B, F, dim)
        inter = torch.bmm(z, z.transpose(1, 2))[:, self.li, self.lj]
        return self.top(torch.cat([x, inter], 1)).squeeze(1)


class WideDeep(nn.Module):
    """Wide & deep (Cheng et al. 2016): a wide linear part over crossed
    feature ids (one embedding of width 1 per cross) plus a deep MLP over
    concatenated embeddings."""

    def __init__(self, dense, tables, dim, crosses, cross_rows, deep):
        super().__init__()
        self.emb = nn.ModuleList([nn.Embedding(rows, dim) for rows in tables])
        self.wide = nn.ModuleList([nn.Embedding(cross_rows, 1) for _ in range(crosses)])
        self.deep = _mlp([dense + dim * len(tables)] + deep + [1], last_act=False)

    def forward(self, dense, sparse, cross):
        deep = self.deep(torch.cat([dense] + [e(sparse[:, i]) for i, e in enumerate(self.emb)], 1))
        wide = sum(w(cross[:, i]) for i, w in enumerate(self.wide))
        return (deep + wide).squeeze(1)


def bce(fwd, *inputs):
    return F.binary_cross_entropy_with_logits(fwd(*inputs[:-1]), inputs[-1])


# ---- vision: U-Net ---------------------------------------------------------------------------
def _double_conv(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet(nn.Module):
    """U-Net (Ronneberger et al. 2015, with batch norm): `depth` downsampling
    levels of double convolutions, transposed-convolution upsampling, skip
    concatenations, per-pixel classifier."""

    def __init__(self, channels=3, classes=21, base=64, depth=4):
        super().__init__()
        w = [base * 2 ** i for i in range(depth + 1)]
        self.down = nn.ModuleList([_double_conv(channels, w[0])] +
                                  [_double_conv(w[i], w[i + 1]) for i in range(depth)])
        self.up = nn.ModuleList([nn.ConvTranspose2d(w[i + 1], w[i], 2, stride=2) for i in reversed(range(depth))])
        self.dec = nn.ModuleList([_double_conv(2 * w[i], w[i]) for i in reversed(range(depth))])
        self.head = nn.Conv2d(w[0], classes, 1)

    def forward(self, x):
        skips = []
        for i, d in enumerate(self.down):
            x = d(x if i == 0 else F.max_pool2d(x, 2))
            skips.append(x)
        skips.pop()
        for up, dec in zip(self.up, self.dec):
            x = dec(torch.cat([skips.pop(), up(x)], 1))
        return self.head(x)


def pixel_xent(fwd, x, y):
    return F.cross_entropy(fwd(x), y)


# ---- vision: a diffusion U-Net ----------------------------------------------------------------
class _TimeRes(nn.Module):
    """residual block of a diffusion U-Net: GroupNorm, SiLU, 3x3 convolutions, the timestep
    embedding added between them"""

    def __init__(self, cin, cout, tdim):
        super().__init__()
        self.n1, self.c1 = nn.GroupNorm(32, cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.t = nn.Linear(tdim, cout)
        self.n2, self.c2 = nn.GroupNorm(32, cout), nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, temb):
        h = self.c1(F.silu(self.n1(x))) + self.t(F.silu(temb))[:, :, None, None]
        return self.skip(x) + self.c2(F.silu(self.n2(h)))


class _SpatialAttn(nn.Module):
    """self-attention over the H x W positions of a feature map (GroupNorm, one qkv projection)"""

    def __init__(self, c, heads):
        super().__init__()
        self.h, self.n = heads, nn.GroupNorm(32, c)
        self.qkv, self.o = nn.Conv2d(c, 3 * c, 1), nn.Conv2d(c, c, 1)

    def forward(self, x):
        B, C, H, W = x.shape
        q, k, v = self.qkv(self.n(x)).reshape(B, 3, self.h, C // self.h, H * W).unbind(1)
        a = (q.transpose(-1, -2) @ k / math.sqrt(C // self.h)).softmax(-1)  # (B, h, HW, HW)
        return x + self.o((v @ a.transpose(-1, -2)).reshape(B, C, H, W))


class DiffusionUNet(nn.Module):
    """DDPM-style noise-prediction U-Net (Ho et al. 2020; the latent U-Nets of Stable Diffusion
    are this shape): sinusoidal timestep embedding through an MLP, levels of `res` _TimeRes
    blocks at widths base * mult, self-attention at the levels in `attn`, strided-convolution
    down- and nearest upsampling, skip concatenations, a middle block with attention."""

    def __init__(self, channels=4, base=128, mult=(1, 2, 2, 4), res=2, attn=(1, 2), heads=4):
        super().__init__()
        self.base, tdim = base, 4 * base
        self.temb = nn.Sequential(nn.Linear(base, tdim), nn.SiLU(), nn.Linear(tdim, tdim))
        self.inc = nn.Conv2d(channels, base, 3, padding=1)
        self.down, skips, c = nn.ModuleList(), [base], base
        for i, m in enumerate(mult):
            for _ in range(res):
                self.down.append(nn.ModuleList([_TimeRes(c, base * m, tdim)] +
                                                ([_SpatialAttn(base * m, heads)] if i in attn else [])))
                c = base * m
                skips.append(c)
            if i + 1 < len(mult):
                self.down.append(nn.Conv2d(c, c, 3, stride=2, padding=1))
                skips.append(c)
        self.mid = nn.ModuleList([_TimeRes(c, c, tdim), _SpatialAttn(c, heads), _TimeRes(c, c, tdim)])
        self.up = nn.ModuleList()
        for i, m in reversed(list(enumerate(mult))):
            for _ in range(res + 1):
                self.up.append(nn.ModuleList([_TimeRes(c + skips.pop(), base * m, tdim)] +
                                             ([_SpatialAttn(base * m, heads)] if i in attn else [])))
                c = base * m
            if i > 0:
                self.up.append(nn.Conv2d(c, c, 3, padding=1))  # after a nearest 2x upsampling
        self.out = nn.Sequential(nn.GroupNorm(32, c), nn.SiLU(), nn.Conv2d(c, channels, 3, padding=1))

    def forward(self, x, t):  # x (B, C, H, W) noisy input, t (B,) timesteps
        half = self.base // 2
        f = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half)
        e = t.float()[:, None] * f[None]
        temb = self.temb(torch.cat([e.sin(), e.cos()], 1))
        h = self.inc(x)
        hs = [h]
        for blk in self.down:
            if isinstance(blk, nn.Conv2d):
                h = blk(h)
            else:
                h = blk[0](h, temb)
                for a in blk[1:]:
                    h = a(h)
            hs.append(h)
        h = self.mid[2](self.mid[1](self.mid[0](h, temb)), temb)
        for blk in self.up:
            if isinstance(blk, nn.Conv2d):
                h = blk(F.interpolate(h, scale_factor=2, mode="nearest"))
            else:
                h = blk[0](torch.cat([h, hs.pop()], 1), temb)
                for a in blk[1:]:
                    h = a(h)
        return self.out(h)


def noise_mse(fwd, x, t, noise):
    """the DDPM objective: the predicted noise against the noise drawn"""
    return F.mse_loss(fwd(x, t), noise)


# ---- vision + language: a CLIP-style two-tower model ----------------------------------------
class CLIP(nn.Module):
    """CLIP-style contrastive model (Radford et al. 2021): a ViT image tower (torchvision's
    VisionTransformer, its class token projected) and a causal text transformer (GPT's pre-norm
    Blocks, the last token projected), both into `embed` dimensions; forward returns the (B, B)
    image-text logits at a learned temperature."""

    def __init__(self, image=224, patch=16, vwidth=768, vlayers=12, vheads=12, vocab=49408, ctx=77,
                 twidth=512, tlayers=12, theads=8, embed=512):
        super().__init__()
        from torchvision.models.vision_transformer import VisionTransformer
        self.visual = VisionTransformer(image, patch, vlayers, vheads, vwidth, 4 * vwidth, num_classes=embed)
        self.tok, self.pos = nn.Embedding(vocab, twidth), nn.Parameter(torch.zeros(ctx, twidth))
        self.text = nn.ModuleList([Block(twidth, theads, True, MLP(twidth, 4 * twidth)) for _ in range(tlayers)])
        self.ln, self.proj = nn.LayerNorm(twidth), nn.Linear(twidth, embed, bias=False)
        self.scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def forward(self, images, ids):  # images (B, 3, S, S), ids (B, ctx)
        x = self.tok(ids) + self.pos[:ids.shape[1]]
        for block in self.text:
            x = block(x)
        t = F.normalize(self.proj(self.ln(x[:, -1])), dim=-1)
        v = F.normalize(self.visual(images), dim=-1)
        return self.scale.exp() * v @ t.t()


def contrastive(fwd, images, ids):
    """CLIP's symmetric cross entropy: image i matches text i"""
    logits = fwd(images, ids)
    y = torch.arange(logits.shape[0])
    return (F.cross_entropy(logits, y) + F.cross_entropy(logits.t(), y)) / 2


# ---- speech encoders -----------------------------------------------------------------------------
class ConformerBlock(nn.Module):
    """Conformer block (Gulati et al. 2020): half-step FFN, self-attention,
    convolution module (pointwise + GLU, depthwise conv, batch norm, SiLU,
    pointwise), half-step FFN, final norm."""

    def __init__(self, d, heads, kernel=31):
        super().__init__()
        self.ff1_ln, self.ff2_ln = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff1, self.ff2 = MLP(d, 4 * d, F.silu), MLP(d, 4 * d, F.silu)
        self.att_ln = nn.LayerNorm(d)
        self.att = SelfAttention(d, heads, False)
        self.conv_ln = nn.LayerNorm(d)
        self.pw1 = nn.Conv1d(d, 2 * d, 1)
        self.dw = nn.Conv1d(d, d, kernel, padding=kernel // 2, groups=d)
        self.bn = nn.BatchNorm1d(d)
        self.pw2 = nn.Conv1d(d, d, 1)
        self.ln = nn.LayerNorm(d)

    def forward(self, x):  # (B, T, d)
        x = x + 0.5 * self.ff1(self.ff1_ln(x))
        x = x + self.att(self.att_ln(x))
        c = F.glu(self.pw1(self.conv_ln(x).transpose(1, 2)), dim=1)
        x = x + self.pw2(F.silu(self.bn(self.dw(c)))).transpose(1, 2)
        x = x + 0.5 * self.ff2(self.ff2_ln(x))
        return self.ln(x)


class Conformer(nn.Module):
    """Conformer encoder for speech recognition: 2 strided 3x3 convolutions
    (4x time subsampling) over log-mel features, linear projection, blocks,
    frame-level classifier over the token vocabulary (a cross-entropy stand-in
    for CTC, whose loss op has no fake-tensor kernel in torch 1.13)."""

    def __init__(self, mels=80, d=144, layers=16, heads=4, vocab=256):
        super().__init__()
        self.sub = nn.Sequential(nn.Conv2d(1, d, 3, 2), nn.ReLU(), nn.Conv2d(d, d, 3, 2), nn.ReLU())
        f = ((mels - 1) // 2 - 1) // 2
        self.proj = nn.Linear(d * f, d)
        self.blocks = nn.ModuleList([ConformerBlock(d, heads) for _ in range(layers)])
        self.out = nn.Linear(d, vocab)

    def forward(self, feats):  # (B, T, mels)
        x = self.sub(feats.unsqueeze(1))  # (B, d, T', F')
        B, C, T, Fr = x.shape
        x = self.proj(x.transpose(1, 2).reshape(B, T, C * Fr))
        for b in self.blocks:
            x = b(x)
        return self.out(x)


class Wav2Vec(nn.Module):
    """wav2vec 2.0-style encoder (Baevski et al. 2020) trained with a
    frame-level classifier: 7 strided 1-D convolutions over the raw waveform
    (group norm on the first), projection, convolutional relative position
    embedding, pre-norm Transformer blocks."""

    def __init__(self, d=512, layers=6, heads=8, conv=256, vocab=32):
        super().__init__()
        spec = [(10, 5)] + [(3, 2)] * 4 + [(2, 2)] * 2
        convs, cin = [], 1
        for i, (k, s) in enumerate(spec):
            convs += [nn.Conv1d(cin, conv, k, s, bias=False)]
            if i == 0:
                convs += [nn.GroupNorm(conv, conv)]
            convs += [nn.GELU()]
            cin = conv
        self.features = nn.Sequential(*convs)
        self.ln = nn.LayerNorm(conv)
        self.proj = nn.Linear(conv, d)
        self.pos = nn.Conv1d(d, d, 31, padding=15, groups=16)
        self.blocks = nn.ModuleList([Block(d, heads, False, MLP(d, 4 * d)) for _ in range(layers)])
        self.out = nn.Linear(d, vocab)

    def forward(self, wave):  # (B, samples)
        x = self.proj(self.ln(self.features(wave.unsqueeze(1)).transpose(1, 2)))
        x = x + F.gelu(self.pos(x.transpose(1, 2))).transpose(1, 2)
        for b in self.blocks:
            x = b(x)
        return self.out(x)


class WaveNet(nn.Module):
    """WaveNet (van den Oord et al. 2016) over 8-bit mu-law audio: an input
    causal convolution, `stacks` x `layers` residual blocks with dilations
    1, 2, ..., 2^(layers-1) (gated tanh x sigmoid activation, a 1x1 residual
    convolution but in the last block, a 1x1 skip convolution), the skips summed, relu, 1x1, relu, 1x1 to
    the 256 classes of the next sample."""

    def __init__(self, stacks=2, layers=10, res=64, skip=256, classes=256):
        super().__init__()
        self.embed = nn.Embedding(classes, res)
        self.filt, self.gate, self.res, self.skip = (nn.ModuleList() for _ in range(4))
        self.dil = [2 ** i for _ in range(stacks) for i in range(layers)]
        for i in range(len(self.dil)):
            self.filt.append(nn.Conv1d(res, res, 2))
            self.gate.append(nn.Conv1d(res, res, 2))
            if i + 1 < len(self.dil):
                self.res.append(nn.Conv1d(res, res, 1))
            self.skip.append(nn.Conv1d(res, skip, 1))
        for i, d in enumerate(self.dil):
            self.filt[i].dilation = self.gate[i].dilation = (d,)
        self.head1 = nn.Conv1d(skip, skip, 1)
        self.head2 = nn.Conv1d(skip, classes, 1)

    def forward(self, ids):  # (B, T) -> (B, T, classes)
        x = self.embed(ids).transpose(1, 2)  # (B, res, T)
        total = 0
        for i, d in enumerate(self.dil):
            p = F.pad(x, (d, 0))
            h = torch.tanh(self.filt[i](p)) * torch.sigmoid(self.gate[i](p))
            s = self.skip[i](h)
            total = s if i == 0 else total + s
            if i + 1 < len(self.dil):
                x = x + self.res[i](h)
        y = self.head2(F.relu(self.head1(F.relu(total))))
        return y.transpose(1, 2)
