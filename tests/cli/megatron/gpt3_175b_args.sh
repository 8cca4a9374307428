# The GPT-3 175B job of Megatron-LM's examples/gpt3/train_gpt3_175b_distributed.sh
# (tag core_v0.14.0), with its shell variables written out and its
# --rampup-batch-size removed (dtplan prices one batch size; see
# gpt3_175b_rampup.sh), on 16 nodes x 8 GPUs, in bf16.
torchrun --nproc_per_node 8 --nnodes 16 --master_addr node0 --master_port 6000 pretrain_gpt.py \
    --num-layers 96 \
    --hidden-size 12288 \
    --num-attention-heads 96 \
    --seq-length 2048 \
    --max-position-embeddings 2048 \
    --attention-backend auto \
    --micro-batch-size 1 \
    --global-batch-size 1536 \
    --train-iters 500000 \
    --weight-decay 0.1 \
    --adam-beta1 0.9 \
    --adam-beta2 0.95 \
    --init-method-std 0.006 \
    --clip-grad 1.0 \
    --bf16 \
    --lr 6.0e-5 \
    --lr-decay-style cosine \
    --min-lr 6.0e-6 \
    --lr-warmup-fraction .001 \
    --lr-decay-iters 430000 \
    --tensor-model-parallel-size 8 \
    --pipeline-model-parallel-size 16 \
    --data-path /data/my-gpt3_00_text_document \
    --vocab-file /data/gpt2-vocab.json \
    --merge-file /data/gpt2-merges.txt \
    --split 949,50,1 \
    --log-interval 100 \
    --save-interval 10000 \
    --eval-interval 1000 \
    --save /ckpt \
    --load /ckpt \
    --eval-iters 10 \
    --tensorboard-dir /tb
